//! Resource URIs as the gate judges them: one spelling for the policy and the downstream, or
//! none for a URI two readers could resolve to different resources.

/// The one spelling of a resource URI the policy judges and the downstream receives, or `None`
/// for a URI the gate refuses to judge: not `scheme:rest`, control or space characters,
/// backslashes, malformed or encoded-reserved percent escapes (`%2F`), or `.`/`..` path
/// segments in any spelling. The scheme is lowercased, escapes of unreserved characters are
/// decoded and the remaining escapes uppercased (RFC 3986 section 6.2.2).
pub(crate) fn normalize(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
    if !scheme_ok {
        return None;
    }
    let mut out = scheme.to_ascii_lowercase();
    out.push(':');
    let bytes = rest.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b <= 0x20 || b == 0x7f || b == b'\\' {
            return None;
        }
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            let v = u8::from_str_radix(text, 16).ok()?;
            let unreserved = v.is_ascii_alphanumeric() || b"-._~".contains(&v);
            if unreserved {
                decoded.push(v);
            } else if v == b'/' || v == b'\\' || v == b'%' || v < 0x20 || v == 0x7f {
                // An encoded separator or escape means another reader may see another path.
                return None;
            } else {
                decoded.extend_from_slice(format!("%{v:02X}").as_bytes());
            }
            i += 3;
            continue;
        }
        decoded.push(b);
        i += 1;
    }
    let rest = String::from_utf8(decoded).ok()?;
    // The path part (before `?` or `#`): no dot segments.
    let path = rest.split(['?', '#']).next().unwrap_or("");
    let path = path.strip_prefix("//").map_or(path, |p| match p.find('/') {
        Some(i) => &p[i..],
        None => "",
    });
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return None;
    }
    out.push_str(&rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn uris_have_one_spelling_or_none() {
        let n = |u: &str| normalize(u);
        assert_eq!(
            n("test://static-text").as_deref(),
            Some("test://static-text")
        );
        assert_eq!(
            n("TEST://static-text").as_deref(),
            Some("test://static-text")
        );
        assert_eq!(
            n("test://secret%2Dkey").as_deref(),
            Some("test://secret-key")
        );
        assert_eq!(n("test://s%65cret").as_deref(), Some("test://secret"));
        assert_eq!(n("test://a%3ab").as_deref(), Some("test://a%3Ab"));
        for bad in [
            "test://public/../secret",
            "test://public/%2e%2e/secret",
            "test://public/.%2E/secret",
            "test://public/./secret",
            "test://public%2Fsecret",
            "test://public\\secret",
            "test://a b",
            "test://a%zz",
            "test://a%4",
            "no-scheme",
            "1x://a",
            "test://a%00",
        ] {
            assert_eq!(n(bad), None, "{bad}");
        }
        // Dots inside a name are not segments.
        assert!(n("file:///srv/a..b/c.txt").is_some());
    }
}
