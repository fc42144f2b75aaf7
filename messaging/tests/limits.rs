//! Hostile sizes and characters against the limits.

use messaging::{check_text, participants, render};
use proptest::prelude::*;

#[test]
fn a_huge_participant_list_is_refused_without_reading_it_all() {
    let named: Vec<String> = (0..200_000).map(|n| format!("user-{n}")).collect();
    let refused = participants("author", &named, 50).unwrap_err();
    assert_eq!(refused.field, "participants");
    assert!(
        refused.message.contains("at most 50"),
        "{}",
        refused.message
    );
}

proptest! {
    #[test]
    fn rendered_markdown_never_carries_a_tag_of_the_author(text in "\\PC{0,200}") {
        let html = render(&text);
        for tag in ["<script", "<iframe", "<img", "<style", "javascript:", "<a href=\"data:", "onerror="] {
            prop_assert!(!html.to_ascii_lowercase().contains(tag), "{tag} in {html}");
        }
    }

    #[test]
    fn checked_text_is_trimmed_and_bounded(text in "\\PC{0,300}") {
        if let Ok(kept) = check_text("body", &text, 100, false) {
            prop_assert!(kept.chars().count() <= 100);
            prop_assert_eq!(kept.trim(), kept.as_str());
            prop_assert!(!kept.is_empty());
        }
    }
}

#[test]
fn html_and_hostile_links_are_text() {
    for (text, absent) in [
        ("<img src=x onerror=alert(1)>", "<img"),
        ("[a](javascript:alert(1))", "href"),
        ("[a](JAVASCRIPT:alert(1))", "href"),
        ("[a](data:text/html;base64,PHNjcmlwdD4=)", "href"),
        ("<a href=\"https://x\">x</a>", "<a href"),
        ("<div onclick=\"x\">", "<div"),
    ] {
        let html = render(text);
        assert!(!html.contains(absent), "{text} -> {html}");
    }
    assert!(render("<mailto:ops@example.com>").contains("href=\"mailto:ops@example.com\""));
    assert!(render("| a |\n|---|\n| b |").contains("<table>"));
}
