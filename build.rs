//! Rebuild when anything under `cases/` changes: the catalogue is embedded in the binary.

fn main() {
    println!("cargo:rerun-if-changed=cases");
}
