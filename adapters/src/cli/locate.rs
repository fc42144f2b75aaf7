//! The line of a field in the text of an attribute file, for reports that point at
//! it (SARIF regions, GitHub annotations, the table).
//!
//! The path's keys are looked for in order, each on a line at or after the previous
//! one's: `"key":` in JSON, `key:` (or quoted, or after a list's `- `) in YAML. Array
//! indexes and wildcards are not counted, and a computed field is looked for by the
//! path inside it. The answer is the line of the deepest key found, or none when not
//! even the first is (a missing field). It is a pointer for a person, not a parse:
//! with the same key at several depths it may name the first.

/// The 1-based line where `field` is written in `text`, if it can be found.
pub fn line_of(text: &str, field: &str) -> Option<usize> {
    let path = field
        .strip_prefix('$')
        .and_then(|call| call.split_once('('))
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(field);
    let keys = path
        .split('.')
        .filter(|s| *s != "*" && !s.bytes().all(|b| b.is_ascii_digit()));
    let mut found: Option<usize> = None;
    for key in keys {
        let from = found.unwrap_or(0);
        match text
            .lines()
            .enumerate()
            .skip(from)
            .find(|(_, line)| declares(line, key))
        {
            Some((index, _)) => found = Some(index),
            None => break,
        }
    }
    found.map(|index| index + 1)
}

/// Whether `line` opens the key `key`, as JSON or as YAML writes it.
fn declares(line: &str, key: &str) -> bool {
    // JSON, anywhere on the line (minified documents are one line).
    let quoted = format!("\"{key}\"");
    let mut rest = line;
    while let Some(at) = rest.find(&quoted) {
        let after = rest.get(at + quoted.len()..).unwrap_or("");
        if after.trim_start().starts_with(':') {
            return true;
        }
        rest = after;
    }
    // YAML: at the start of the line, after indentation and any `- `.
    let mut start = line.trim_start();
    while let Some(item) = start.strip_prefix("- ") {
        start = item.trim_start();
    }
    let single = format!("'{key}'");
    [key, single.as_str()]
        .iter()
        .any(|k| start.strip_prefix(k).is_some_and(|r| r.starts_with(':')))
}

#[cfg(test)]
mod tests {
    use super::line_of;

    const JSON: &str = r#"{
  "name": "deploy",
  "props": {
    "stages": [
      {"stageName": "build", "steps": [{"plugin": {"name": "eslint", "version": "latest"}}]}
    ],
    "version": "2"
  }
}"#;

    const YAML: &str = "name: deploy\nprops:\n  stages:\n    - stageName: build\n      steps:\n        - plugin:\n            name: eslint\n            version: latest\n  'owner': me\n";

    #[test]
    fn json_paths_are_found_in_order() {
        assert_eq!(line_of(JSON, "name"), Some(2));
        assert_eq!(
            line_of(JSON, "props.stages.*.steps.0.plugin.version"),
            Some(5)
        );
        // The first `version` after `props` is the plugin's; the path decides.
        assert_eq!(line_of(JSON, "props.version"), Some(5));
        assert_eq!(line_of(JSON, "$count(props.stages)"), Some(4));
        assert_eq!(line_of(JSON, "missing.field"), None);
        assert_eq!(line_of(JSON, "props.missing"), Some(3));
    }

    #[test]
    fn yaml_paths_are_found_in_order() {
        assert_eq!(line_of(YAML, "name"), Some(1));
        assert_eq!(line_of(YAML, "props.stages.*.stageName"), Some(4));
        assert_eq!(
            line_of(YAML, "props.stages.*.steps.*.plugin.version"),
            Some(8)
        );
        assert_eq!(line_of(YAML, "$keys(props)"), Some(2));
        assert_eq!(line_of(YAML, "props.owner"), Some(9));
        assert_eq!(line_of(YAML, "owner"), Some(9));
        assert_eq!(line_of(YAML, "nothing"), None);
    }

    #[test]
    fn a_key_is_not_a_value_nor_a_prefix() {
        assert_eq!(line_of("a: name\nnamed: 1\nname: 2\n", "name"), Some(3));
        assert_eq!(line_of(r#"{"a": "name", "name": 1}"#, "name"), Some(1));
        assert_eq!(line_of(r#"{"a": "\"name\"", "b": 1}"#, "name"), None);
    }
}
