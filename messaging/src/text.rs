//! Titles and bodies: trimmed, not empty, bounded in characters, without control
//! characters other than line breaks and tabs.

use crate::MessageError;

/// The longest title, in characters.
pub const TITLE_MAX: usize = 200;

/// Checks a text for `field`: trimmed, 1 to `max` characters, no control characters
/// but `\n`, `\r` and `\t` (none at all when `single_line`).
///
/// ```
/// use messaging::check_text;
/// assert_eq!(check_text("title", "  Hello ", 10, true).unwrap(), "Hello");
/// assert!(check_text("title", " ", 10, true).is_err());
/// assert!(check_text("body", "a\nb", 10, false).is_ok());
/// assert!(check_text("title", "a\nb", 10, true).is_err());
/// assert!(check_text("body", "éééééééééééé", 10, false).is_err());
/// assert!(check_text("body", "a\u{7}", 10, false).is_err());
/// ```
pub fn check_text(
    field: &'static str,
    text: &str,
    max: usize,
    single_line: bool,
) -> Result<String, MessageError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(MessageError::new(field, "must not be empty"));
    }
    if text.chars().count() > max {
        return Err(MessageError::new(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    let allowed = |c: char| !single_line && matches!(c, '\n' | '\r' | '\t');
    if text.chars().any(|c| c.is_control() && !allowed(c)) {
        return Err(MessageError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(text.to_owned())
}
