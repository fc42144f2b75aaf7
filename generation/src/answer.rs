//! The JSON document in a model's answer. Models wrap it in a Markdown fence, put
//! words before or after it, or stop before its end (a length limit, a cut stream):
//! the first is read, the second skipped, the third is a problem the next attempt
//! is told about.

use serde_json::Value;

use crate::problem::Problem;

/// The first JSON object of `text`: inside its first ```` ``` ```` fence when it has
/// one, else from its first `{`; what follows the object is ignored.
pub fn json_of(text: &str) -> Result<Value, Problem> {
    let inner = fenced(text).unwrap_or(text);
    let Some(start) = inner.find('{') else {
        return Err(Problem::json(if inner.trim().is_empty() {
            "the answer is empty; write one JSON object"
        } else {
            "the answer holds no JSON object; write one JSON object and nothing else"
        }));
    };
    let candidate = inner.get(start..).unwrap_or_default();
    let mut values = serde_json::Deserializer::from_str(candidate).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Ok(value),
        Some(Err(error)) if error.is_eof() => Err(Problem::json(format!(
            "the JSON object is cut off before its end (line {}, column {}); write the whole object, shorter if need be",
            error.line(),
            error.column()
        ))),
        Some(Err(error)) => Err(Problem::json(format!("the JSON does not parse: {error}"))),
        None => Err(Problem::json("the answer holds no JSON object")),
    }
}

/// The text inside the first Markdown code fence (its info string, `json`, dropped);
/// an opened fence that never closes runs to the end (a cut answer).
fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = text.get(open + 3..)?;
    // The info string runs to the end of the line.
    let body = match after.find('\n') {
        Some(line_end) => after.get(line_end + 1..)?,
        None => return None,
    };
    Some(match body.find("```") {
        Some(close) => body.get(..close).unwrap_or(body),
        None => body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::ProblemKind;
    use serde_json::json;

    #[test]
    fn plain_fenced_and_chatty_answers_are_read() {
        assert_eq!(json_of(r#"{"a": 1}"#), Ok(json!({"a": 1})));
        assert_eq!(
            json_of("Here it is:\n```json\n{\"a\": [1, 2]}\n```\nEnjoy."),
            Ok(json!({"a": [1, 2]}))
        );
        assert_eq!(
            json_of("Sure! {\"a\": \"}\"} and some words {\"b\": 2}"),
            Ok(json!({"a": "}"})),
            "the first object, a brace in a string no end"
        );
    }

    #[test]
    fn cut_invalid_and_empty_answers_are_problems_that_say_which() {
        let cut = json_of("```json\n{\"project\": \"p\", \"props\": {\"stages\": [").unwrap_err();
        assert_eq!(cut.kind, ProblemKind::Json);
        assert!(cut.message.contains("cut off"), "{}", cut.message);
        let invalid = json_of("{\"a\": tru}").unwrap_err();
        assert!(
            invalid.message.contains("does not parse"),
            "{}",
            invalid.message
        );
        assert!(json_of("  ").unwrap_err().message.contains("empty"));
        assert!(json_of("I cannot help with that.")
            .unwrap_err()
            .message
            .contains("no JSON object"));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_an_answer_or_a_problem(text in "\\PC{0,200}") {
            let _ = json_of(&text);
        }

        #[test]
        fn an_object_survives_fences_and_words(key in "[a-z]{1,8}", n in 0i64..1000, words in "[A-Za-z .]{0,40}") {
            let object = json!({ key.clone(): n });
            let answer = format!("{words}\n```json\n{object}\n```\n{words}");
            proptest::prop_assert_eq!(json_of(&answer), Ok(object));
        }
    }
}
