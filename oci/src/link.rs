//! The `Link` header of a paged listing (RFC 8288, as distribution's tags list
//! uses it): the address of the next page.

/// The target of the link marked `rel="next"` (its address as written: relative or
/// absolute; the caller resolves it and decides whether it may follow it).
///
/// ```
/// assert_eq!(
///     oci::next_link(r#"</v2/a/tags/list?n=100&last=x>; rel="next""#),
///     Some("/v2/a/tags/list?n=100&last=x".to_owned())
/// );
/// assert_eq!(oci::next_link(r#"</x>; rel="prev""#), None);
/// assert_eq!(oci::next_link(r#"<>; rel=next"#), None);
/// ```
pub fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let next = params.split(';').any(|param| {
            let (name, value) = param.split_once('=').unwrap_or((param, ""));
            name.trim().eq_ignore_ascii_case("rel")
                && value
                    .trim()
                    .trim_matches('"')
                    .split_ascii_whitespace()
                    .any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        let target = target.trim();
        let inner = target.strip_prefix('<')?.strip_suffix('>')?;
        (next && !inner.is_empty()).then(|| inner.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_the_link_marked_next() {
        assert_eq!(
            next_link(r#"</v2/a/tags/list?n=100&last=x>; rel="next""#),
            Some("/v2/a/tags/list?n=100&last=x".to_owned())
        );
        assert_eq!(
            next_link(r#"</p1>; rel="prev", </p3>; REL="next last""#),
            Some("/p3".to_owned())
        );
        assert_eq!(next_link(r#"</x>; rel="prev""#), None);
        assert_eq!(next_link("no link at all"), None);
        assert_eq!(next_link(r#"/x; rel="next""#), None, "a target is <...>");
        assert_eq!(next_link(""), None);
    }
}
