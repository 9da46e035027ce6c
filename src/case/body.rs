//! Body generators: a case body resolved to bytes that are produced on demand, never built whole.
//!
//! `repeat` and `nest` bodies can be a gibibyte long; [`Body::chunks`] yields them in pieces of at
//! most [`CHUNK`] bytes so a transport can stream them with bounded memory.

use bytes::Bytes;

/// The largest piece [`Body::chunks`] yields.
pub(crate) const CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone)]
enum Part {
    Bytes(Bytes),
    Repeat { unit: Bytes, count: u64 },
}

/// A request body: a sequence of literal and repeated byte runs.
#[derive(Debug, Clone, Default)]
pub struct Body {
    parts: Vec<Part>,
}

impl Body {
    pub fn empty() -> Body {
        Body::default()
    }

    pub fn from_bytes(bytes: impl Into<Bytes>) -> Body {
        let mut body = Body::default();
        body.push(bytes.into());
        body
    }

    pub fn push(&mut self, bytes: Bytes) {
        if !bytes.is_empty() {
            self.parts.push(Part::Bytes(bytes));
        }
    }

    pub(crate) fn push_repeat(&mut self, unit: Bytes, count: u64) {
        if !unit.is_empty() && count > 0 {
            self.parts.push(Part::Repeat { unit, count });
        }
    }

    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len() as u64,
                Part::Repeat { unit, count } => (unit.len() as u64).saturating_mul(*count),
            })
            .fold(0u64, u64::saturating_add)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole body in memory, if it is at most `limit` bytes (for small bodies and reports).
    pub(crate) fn to_vec_within(&self, limit: u64) -> Option<Vec<u8>> {
        if self.len() > limit {
            return None;
        }
        let mut out = Vec::with_capacity(self.len() as usize);
        for chunk in self.chunks() {
            out.extend_from_slice(&chunk);
        }
        Some(out)
    }

    /// The body compressed with `coding`, read piece by piece (a repeated run of a gibibyte
    /// costs time, not memory): what a case with `content_encoding` sends.
    pub fn encoded(&self, coding: super::ContentCoding) -> Body {
        use std::io::Write as _;
        match coding {
            super::ContentCoding::Gzip => {
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                for chunk in self.chunks() {
                    // Writing into a Vec cannot fail.
                    enc.write_all(&chunk).expect("gzip into memory");
                }
                Body::from_bytes(enc.finish().expect("gzip into memory"))
            }
        }
    }

    /// The first `n` bytes (for failure messages), without materialising the rest.
    pub fn prefix(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in self.chunks() {
            let take = (n - out.len()).min(chunk.len());
            out.extend_from_slice(&chunk[..take]);
            if out.len() >= n {
                break;
            }
        }
        out
    }

    /// The body in pieces of at most [`CHUNK`] bytes.
    pub(crate) fn chunks(&self) -> Chunks<'_> {
        Chunks {
            parts: &self.parts,
            index: 0,
            remaining: None,
            block: None,
        }
    }
}

/// Iterator over a [`Body`]'s pieces.
pub(crate) struct Chunks<'a> {
    parts: &'a [Part],
    index: usize,
    /// Units of the current repeat part still to yield.
    remaining: Option<u64>,
    /// A block of whole units of the current repeat part, reused for every piece.
    block: Option<(Bytes, u64)>,
}

impl Iterator for Chunks<'_> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        loop {
            let part = self.parts.get(self.index)?;
            match part {
                Part::Bytes(b) => {
                    self.index += 1;
                    return Some(b.clone());
                }
                Part::Repeat { unit, count } => {
                    let remaining = *self.remaining.get_or_insert(*count);
                    if remaining == 0 {
                        self.index += 1;
                        self.remaining = None;
                        self.block = None;
                        continue;
                    }
                    let (block, per_block) = self.block.get_or_insert_with(|| {
                        let per = (CHUNK / unit.len()).max(1) as u64;
                        let per = per.min(*count);
                        let mut buf = Vec::with_capacity(unit.len() * per as usize);
                        for _ in 0..per {
                            buf.extend_from_slice(unit);
                        }
                        (Bytes::from(buf), per)
                    });
                    let take = remaining.min(*per_block);
                    self.remaining = Some(remaining - take);
                    return Some(block.slice(..(take as usize * unit.len())));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_coding_inflates_to_the_same_bytes() {
        use std::io::Read as _;
        let mut body = Body::default();
        body.push(Bytes::from_static(b"{\"text\":\""));
        body.push_repeat(Bytes::from_static(b"AAAAAAAA"), 1 << 20);
        body.push(Bytes::from_static(b"\"}"));
        let coded = body.encoded(crate::case::ContentCoding::Gzip);
        assert!(
            coded.len() < body.len() / 100,
            "8 MiB of one letter codes small"
        );
        let wire = coded.to_vec_within(u64::MAX).expect("small");
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(wire.as_slice())
            .read_to_end(&mut inflated)
            .expect("valid gzip");
        assert_eq!(Some(inflated), body.to_vec_within(u64::MAX));
    }

    #[test]
    fn repeat_streams_exact_bytes() {
        let mut body = Body::default();
        body.push(Bytes::from_static(b"["));
        body.push_repeat(Bytes::from_static(b"ab,"), 100_000);
        body.push(Bytes::from_static(b"]"));
        assert_eq!(body.len(), 2 + 300_000);
        let mut total = 0;
        let mut joined = Vec::new();
        for c in body.chunks() {
            assert!(c.len() <= CHUNK);
            total += c.len();
            joined.extend_from_slice(&c);
        }
        assert_eq!(total as u64, body.len());
        assert!(joined.starts_with(b"[ab,ab,"));
        assert!(joined.ends_with(b"ab,]"));
        assert_eq!(body.prefix(4), b"[ab,");
    }

    #[test]
    fn gibibyte_length_is_computed_not_built() {
        let mut body = Body::default();
        body.push_repeat(Bytes::from_static(b"A"), 1 << 30);
        assert_eq!(body.len(), 1 << 30);
        assert_eq!(body.chunks().next().map(|c| c.len()), Some(CHUNK));
    }
}
