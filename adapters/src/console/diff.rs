//! Two texts side by side, aligned on their difference (a rule's history compares
//! two versions this way).

/// One line of a side-by-side difference: the older text, the newer, whether they
/// differ.
pub struct Line {
    /// The older text.
    pub old: String,
    /// The newer text.
    pub new: String,
    /// Whether they differ.
    pub changed: bool,
}

/// Two texts line by line, aligned on their difference (Myers', by `similar`): a
/// replaced line faces its replacement, a line only one side has an empty cell.
pub fn side_by_side(old: &str, new: &str) -> Vec<Line> {
    use similar::{DiffOp, TextDiff};
    let diff = TextDiff::from_lines(old, new);
    let (old_lines, new_lines) = (diff.old_slices(), diff.new_slices());
    let text = |lines: &[&str], at: usize| {
        lines
            .get(at)
            .map(|l| l.trim_end_matches(['\n', '\r']).to_owned())
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    for op in diff.ops() {
        let (old_range, new_range) = (op.old_range(), op.new_range());
        let changed = !matches!(op, DiffOp::Equal { .. });
        let count = old_range.len().max(new_range.len());
        for k in 0..count {
            let side = |lines: &[&str], range: &std::ops::Range<usize>| {
                if k < range.len() {
                    text(lines, range.start + k)
                } else {
                    String::new()
                }
            };
            rows.push(Line {
                old: side(old_lines, &old_range),
                new: side(new_lines, &new_range),
                changed,
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_versions_line_up_with_their_changes_marked() {
        let lines = side_by_side("a\nb\nc\n", "a\nB\nc\nd\n");
        let shown: Vec<(&str, &str, bool)> = lines
            .iter()
            .map(|l| (l.old.as_str(), l.new.as_str(), l.changed))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("a", "a", false),
                ("b", "B", true),
                ("c", "c", false),
                ("", "d", true),
            ]
        );
        assert!(side_by_side("", "").is_empty());
        assert!(side_by_side("same", "same").iter().all(|l| !l.changed));
    }
}
