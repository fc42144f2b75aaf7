//! What a model is told: instructions naming the body it must write and its JSON
//! Schema (derived by the server from the very type a create parses), then the
//! user's prompt (or a repository's survey); after a failed attempt, its answer and
//! the problems found in it, so that the next attempt corrects exactly those.

use crate::problem::Problem;

/// How many answers a generation asks for at most: the first and two retries.
pub const MAX_ATTEMPTS: u32 = 3;

/// What is generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pipeline: a `POST /api/pipelines` body.
    Pipeline,
    /// A plugin: a `POST /api/plugins/deploy-generated` body.
    Plugin,
}

impl Kind {
    /// `pipeline` or `plugin`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pipeline => "pipeline",
            Kind::Plugin => "plugin",
        }
    }

    fn guidance(self) -> &'static str {
        match self {
            Kind::Pipeline => {
                "You write CI/CD pipeline definitions for a governed delivery platform. \
The object is the body of a pipeline create: `project`, `organization` and `pipelineName` \
(names: letters, digits, `.`, `_`, `-`), `accessModifier` (`public` or `private`) and \
`props`: `props.synth` with `source` (`type`, and `options` with `repo`, `branch`) and \
`plugin` (`name`, `version`) that synthesizes the pipeline; `props.stages`, each with a \
`stageName` and `steps`, each step with a `name`, the `plugin` it runs (`name`, \
`version`) and optionally `env` (a map of strings)."
            }
            Kind::Plugin => {
                "You write build plugins for a governed delivery platform: a plugin is a \
container image that runs one kind of CI step. The object is the body of a plugin deploy: \
`name` (letters, digits, `.`, `_`, `-`), `version` (for example `1.0.0`), `commands` (the \
shell commands the step runs), `installCommands` (the commands that install its tools) \
and `dockerfile` (the complete Dockerfile of the image, starting with `FROM`)."
            }
        }
    }
}

/// Who says a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person asking (and the server's corrections).
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// `user` or `assistant`, as every provider spells it.
    pub fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Who.
    pub role: Role,
    /// What.
    pub content: String,
}

/// The instructions and the turns so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The system instructions.
    pub system: String,
    /// The turns, alternating, starting with the user.
    pub turns: Vec<Turn>,
}

impl Conversation {
    /// A conversation asking for a `kind` whose JSON Schema is `schema`, from the
    /// user's `prompt`.
    pub fn new(kind: Kind, schema: &str, prompt: &str) -> Conversation {
        Conversation {
            system: format!(
                "{}\n\nAnswer with exactly one JSON object and nothing else: no Markdown, \
no comments, no explanation. It must validate against this JSON Schema:\n{schema}\n\n\
The organization's compliance rules are applied to the object; when an answer is refused \
you are told why and answer again with the whole corrected object.",
                kind.guidance()
            ),
            turns: vec![Turn {
                role: Role::User,
                content: prompt.to_owned(),
            }],
        }
    }

    /// A conversation asking for a `kind` that builds the repository `described`
    /// (see [`crate::repository::describe`]).
    pub fn for_repository(kind: Kind, schema: &str, described: &str) -> Conversation {
        let prompt = format!(
            "Write a {} for the repository below: build and test it with the tools its \
files show, and keep what its existing CI definitions do.\n\n{described}",
            kind.name()
        );
        Conversation::new(kind, schema, &prompt)
    }

    /// After an answer with `problems`: the answer as the model's turn, and the
    /// problems as the next request.
    pub fn retry(&mut self, answer: &str, problems: &[Problem]) {
        self.turns.push(Turn {
            role: Role::Assistant,
            content: answer.to_owned(),
        });
        let mut request = String::from(
            "That answer cannot be used. Fix every problem below and answer again with the \
whole corrected JSON object only:\n",
        );
        for problem in problems {
            request.push_str("- ");
            request.push_str(&problem.line());
            request.push('\n');
        }
        self.turns.push(Turn {
            role: Role::User,
            content: request,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_keeps_the_answer_and_names_each_problem() {
        let mut conversation =
            Conversation::new(Kind::Pipeline, "{\"type\":\"object\"}", "build my app");
        assert!(conversation.system.contains("{\"type\":\"object\"}"));
        assert!(conversation.system.contains("pipelineName"));
        conversation.retry(
            "{\"project\": 1}",
            &[
                Problem::validation(Some("project".to_owned()), "must be a string"),
                Problem::compliance(
                    "no-prod",
                    "error",
                    Some("props.stages".to_owned()),
                    "no prod stage",
                ),
            ],
        );
        let roles: Vec<_> = conversation.turns.iter().map(|t| t.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        let last = &conversation.turns[2].content;
        assert!(
            last.contains("- invalid: project: must be a string"),
            "{last}"
        );
        assert!(
            last.contains(
                "- blocked by a compliance rule: props.stages: no prod stage (rule no-prod, error)"
            ),
            "{last}"
        );
    }

    #[test]
    fn a_plugin_conversation_asks_for_the_deploy_body() {
        let conversation =
            Conversation::for_repository(Kind::Plugin, "{}", "Languages: Rust (3 files)");
        assert!(conversation.system.contains("dockerfile"));
        assert!(conversation.turns[0].content.contains("Languages: Rust"));
    }
}
