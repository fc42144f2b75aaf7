//! Who takes part in a conversation.

use crate::MessageError;

/// The participants of a new conversation: the author, then each other user named
/// once (the author named again is ignored), at least one other, at most `max` in
/// all.
///
/// ```
/// use messaging::participants;
/// let p = participants("ann", &["bob".into(), "ann".into(), "bob".into(), "cy".into()], 5).unwrap();
/// assert_eq!(p, ["ann", "bob", "cy"]);
/// assert!(participants("ann", &["ann".into()], 5).is_err());
/// assert!(participants("ann", &["b".into(), "c".into()], 2).is_err());
/// ```
pub fn participants(
    author: &str,
    named: &[String],
    max: usize,
) -> Result<Vec<String>, MessageError> {
    let mut all = vec![author.to_owned()];
    for user in named {
        let user = user.trim();
        if user.is_empty() || user.len() > 200 || user.chars().any(char::is_control) {
            return Err(MessageError::new(
                "participants",
                "each participant is a user id of 1 to 200 characters",
            ));
        }
        if !all.iter().any(|u| u == user) {
            all.push(user.to_owned());
        }
        // Past the limit already: no need to read a hostile list to its end.
        if all.len() > max {
            break;
        }
    }
    if all.len() < 2 {
        return Err(MessageError::new(
            "participants",
            "name at least one other member of the organization",
        ));
    }
    if all.len() > max {
        return Err(MessageError::new(
            "participants",
            format!("a conversation has at most {max} participants, its author included"),
        ));
    }
    Ok(all)
}
