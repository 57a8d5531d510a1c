//! Turning a caller's key into the part of a store key that names it.
//!
//! A caller's key is any bytes. Keys of 1 to 128 bytes with no `{` or `}` and
//! not starting with `#` are used as they are; any other key (empty, long,
//! holding braces) becomes `#` and its SHA-1 in hex, so no caller can choose a
//! Redis Cluster slot or bloat the store. Every binding builds the same tag, so
//! a quota is shared across languages.

use std::borrow::Cow;

/// Longest caller key kept verbatim.
pub const MAX_VERBATIM_KEY: usize = 128;

/// The tag that names a caller's key inside store keys.
pub fn key_tag(key: &[u8]) -> Vec<u8> {
    tag_of(key).into_owned()
}

/// [`key_tag`], borrowing the key when it is its own tag (a check's hot
/// path makes no copy of it).
pub fn tag_of(key: &[u8]) -> Cow<'_, [u8]> {
    let verbatim = !key.is_empty()
        && key.len() <= MAX_VERBATIM_KEY
        && key[0] != b'#'
        && !key.iter().any(|&b| b == b'{' || b == b'}');
    if verbatim {
        return Cow::Borrowed(key);
    }
    let mut tag = Vec::with_capacity(41);
    tag.push(b'#');
    tag.extend_from_slice(sha1_smol::Sha1::from(key).digest().to_string().as_bytes());
    Cow::Owned(tag)
}

/// The Redis key of a caller key's log: `<prefix>:{<tag>}:l`, or
/// `<prefix>:{<tag>}:<scope>:l` for a scoped limiter. Everything one check
/// touches carries the same `{<tag>}`, so it lives in one Cluster slot.
pub fn log_key(prefix: &str, tag: &[u8], scope: &str) -> Vec<u8> {
    let mut out = tagged(prefix, tag);
    if !scope.is_empty() {
        out.extend_from_slice(scope.as_bytes());
        out.push(b':');
    }
    out.push(b'l');
    out
}

/// The Redis key of a caller key's leases (its in-flight rule's slots, a
/// sorted set): `<prefix>:{<tag>}:f`, or `<prefix>:{<tag>}:<scope>:f`, in
/// its log's Cluster slot.
pub fn lease_key(prefix: &str, tag: &[u8], scope: &str) -> Vec<u8> {
    let mut out = log_key(prefix, tag, scope);
    out.pop();
    out.push(b'f');
    out
}

/// The Redis key of a caller key's record: `<prefix>:{<tag>}:p`, or
/// for the bans it earned in a scope (`penalize` in a scoped limiter)
/// `<prefix>:{<tag>}:<scope>:p`, in the same Cluster slot.
pub fn record_key(prefix: &str, tag: &[u8], scope: &str) -> Vec<u8> {
    let mut out = tagged(prefix, tag);
    if !scope.is_empty() {
        out.extend_from_slice(scope.as_bytes());
        out.push(b':');
    }
    out.push(b'p');
    out
}

/// The Redis key of a caller key's fail2ban strikes: `<prefix>:{<tag>}:<name>:f`.
pub fn strikes_key(prefix: &str, tag: &[u8], name: &str) -> Vec<u8> {
    let mut out = tagged(prefix, tag);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b":f");
    out
}

fn tagged(prefix: &str, tag: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + tag.len() + 24);
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(b":{");
    out.extend_from_slice(tag);
    out.extend_from_slice(b"}:");
    out
}

/// Checks a limiter's scope: up to 128 printable ASCII characters (braces allowed:
/// they come after the key's tag, so they cannot move its slot).
pub fn check_scope(scope: &str) -> crate::error::Result<()> {
    if scope.len() <= 128 && scope.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(());
    }
    Err(crate::error::Error::config(format!(
        "invalid scope '{scope}': give at most 128 printable ASCII characters without spaces"
    )))
}

/// A scope from a name (a throttle's, a path's, a view's): each character
/// outside printable ASCII, and each space, becomes `_`; at most 128 kept.
pub fn scope_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .take(128)
        .collect()
}

/// A key that names a person (an e-mail address or a user name typed into a
/// form): NFKC-normalised (as Django's `AuthenticationForm` reads a user
/// name: a fullwidth `ａlice` is `alice`), trimmed and case-folded, so
/// `" Alice@Example.com"`, `"ａlice@example.com"` and `"alice@example.com"`
/// share one quota; `None` when nothing is left, as an absent or blank
/// field must not put every such request under one key.
pub fn identity(text: &str) -> Option<String> {
    use unicode_normalization::UnicodeNormalization;
    let normal: String = text.nfkc().collect();
    let trimmed = normal.trim();
    (!trimmed.is_empty()).then(|| {
        // folding can leave a form NFKC would change again (NFKC_Casefold)
        caseless::default_case_fold_str(trimmed).nfkc().collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_stay_readable() {
        assert_eq!(key_tag(b"user:42"), b"user:42".to_vec());
        assert_eq!(log_key("rk", b"user:42", ""), b"rk:{user:42}:l".to_vec());
        assert_eq!(
            log_key("rk", b"user:42", "api"),
            b"rk:{user:42}:api:l".to_vec()
        );
        assert_eq!(record_key("rk", b"user:42", ""), b"rk:{user:42}:p".to_vec());
        assert_eq!(
            record_key("rk", b"user:42", "login"),
            b"rk:{user:42}:login:p".to_vec()
        );
        assert_eq!(
            strikes_key("rk", b"1.2.3.4", "php"),
            b"rk:{1.2.3.4}:php:f".to_vec()
        );
        assert!(check_scope("path:/api/{v}").is_ok());
        assert!(check_scope("a b").is_err());
        assert_eq!(key_tag(&[b'a'; 128]).len(), 128);
    }

    #[test]
    fn hostile_keys_are_hashed() {
        for key in [
            &b""[..],
            b"{x}",
            b"a}b",
            b"#abc",
            &[b'a'; 129],
            &[0xff, 0xfe, b'{'],
        ] {
            let tag = key_tag(key);
            assert_eq!(tag.len(), 41, "{key:?}");
            assert_eq!(tag[0], b'#');
            assert!(!tag.contains(&b'{') && !tag.contains(&b'}'));
        }
        assert_ne!(key_tag(b"{x}"), key_tag(b"{y}"));
        assert_eq!(
            key_tag(b""),
            b"#da39a3ee5e6b4b0d3255bfef95601890afd80709".to_vec(),
            "the SHA-1 of nothing, as every language computes it"
        );
    }

    #[test]
    fn binary_keys_are_kept_as_bytes() {
        assert_eq!(key_tag(b"a\0b\n\xff"), b"a\0b\n\xff".to_vec());
    }

    #[test]
    fn identities_are_trimmed_lower_case_and_never_blank() {
        assert_eq!(
            identity(" Alice@Example.COM\n").as_deref(),
            Some("alice@example.com")
        );
        assert_eq!(identity("ÉLISE").as_deref(), Some("élise"));
        // look-alikes a form normalises are one person: fullwidth letters,
        // a decomposed accent, a ligature, a sharp s, a fullwidth space
        for spelled in ["\u{ff41}lice", "alic\u{ff45}", "ALICE", "\u{3000}alice"] {
            assert_eq!(identity(spelled).as_deref(), Some("alice"), "{spelled}");
        }
        assert_eq!(identity("E\u{301}lise").as_deref(), Some("\u{e9}lise"));
        assert_eq!(identity("\u{fb01}nn").as_deref(), Some("finn"));
        assert_eq!(
            identity("Stra\u{df}e").as_deref(),
            identity("STRASSE").as_deref()
        );
        assert_eq!(identity("\u{3000}"), None);
        assert_eq!(identity("   "), None);
        assert_eq!(identity(""), None);
    }

    #[test]
    fn scope_names_are_printable() {
        assert_eq!(scope_name("req/ip"), "req/ip");
        assert_eq!(scope_name("path:/café x"), "path:/caf__x");
        assert_eq!(scope_name(&"a".repeat(300)).len(), 128);
        assert!(check_scope(&scope_name("any\ttext\u{1f600}")).is_ok());
    }
}
