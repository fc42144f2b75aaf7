//! The values the inventory (pipelines and plugins) is made of, parsed once: a
//! request's body deserializes into them, storage decodes into them, and their
//! schemas are derived from them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Who may see an entity of the inventory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccessModifier {
    /// Every organization.
    Public,
    /// Its organization only.
    Private,
}

impl AccessModifier {
    /// Both, in the order the API documents them.
    pub const ALL: [AccessModifier; 2] = [AccessModifier::Public, AccessModifier::Private];

    /// The wire name: `public` or `private`.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessModifier::Public => "public",
            AccessModifier::Private => "private",
        }
    }

    /// Parses the wire name.
    pub fn parse(text: &str) -> Option<AccessModifier> {
        AccessModifier::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

impl fmt::Display for AccessModifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text of a bounded length: 1 to `$max` characters, not blank, without control
/// characters; parsed when deserialized, documented as such.
macro_rules! bounded_text {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The most characters it takes.
            pub const MAX: usize = $max;

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(text: String) -> Result<Self, Self::Error> {
                if text.trim().is_empty()
                    || text.chars().count() > $max
                    || text.chars().any(char::is_control)
                {
                    return Err(format!(
                        "must be 1 to {} characters, not blank, without control characters",
                        $max
                    ));
                }
                Ok($name(text))
            }
        }

        impl From<$name> for String {
            fn from(text: $name) -> String {
                text.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .min_length(Some(1))
                    .max_length(Some($max))
                    .pattern(Some(r"\S"))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

bounded_text!(
    /// A name of the inventory (a project, a pipeline, a stage, a step, a plugin
    /// reference and its version).
    Name,
    200
);

bounded_text!(
    /// A cloud resource name (an ARN) the pipeline registry maps.
    Arn,
    2048
);

/// Where a plugin's image build stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    /// Waiting in its queue.
    Queued,
    /// Being built.
    Running,
    /// Built.
    Completed,
    /// Failed with no retry left.
    Failed,
    /// Timed out with no retry left.
    TimedOut,
}

impl BuildStatus {
    /// Every status.
    pub const ALL: [BuildStatus; 5] = [
        BuildStatus::Queued,
        BuildStatus::Running,
        BuildStatus::Completed,
        BuildStatus::Failed,
        BuildStatus::TimedOut,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Queued => "queued",
            BuildStatus::Running => "running",
            BuildStatus::Completed => "completed",
            BuildStatus::Failed => "failed",
            BuildStatus::TimedOut => "timed_out",
        }
    }

    /// Parses the stored name.
    pub fn parse(text: &str) -> Option<BuildStatus> {
        BuildStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// The result kept with an entity: set at the door or by re-evaluation
/// (`pass`, `warn`, `block`), or by a scan, which may also find it could not be judged
/// (`error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntityResult {
    /// No violation is left.
    Pass,
    /// Violations are left, none blocking.
    Warn,
    /// A blocking violation is left.
    Block,
    /// A scan could not judge the entity (its document is over a limit, say).
    Error,
}

impl EntityResult {
    /// The stored name of a result.
    pub fn parse(text: &str) -> Option<EntityResult> {
        match text {
            "pass" => Some(EntityResult::Pass),
            "warn" => Some(EntityResult::Warn),
            "block" => Some(EntityResult::Block),
            "error" => Some(EntityResult::Error),
            _ => None,
        }
    }
}

impl From<compliance_core::Outcome> for EntityResult {
    fn from(outcome: compliance_core::Outcome) -> Self {
        match outcome {
            compliance_core::Outcome::Pass => EntityResult::Pass,
            compliance_core::Outcome::Warn => EntityResult::Warn,
            compliance_core::Outcome::Block => EntityResult::Block,
        }
    }
}

impl From<compliance_core::Compliance> for EntityCompliance {
    fn from(judged: compliance_core::Compliance) -> Self {
        EntityCompliance {
            result: judged.result.into(),
            violations: judged.violations,
            scan_id: None,
        }
    }
}

/// An entity's compliance as it is kept with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntityCompliance {
    /// The result.
    pub result: EntityResult,
    /// The violations not waived.
    pub violations: Vec<compliance_core::Violation>,
    /// The scan that set it, when a scan did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_access_modifiers_parse_or_say_why() {
        let name = |v: serde_json::Value| serde_json::from_value::<Name>(v);
        assert_eq!(name("build".into()).unwrap().as_str(), "build");
        for bad in ["", "   ", "a\u{0}b", "tab\there"] {
            assert!(name(bad.into()).is_err(), "{bad:?}");
        }
        assert!(name("x".repeat(Name::MAX).into()).is_ok());
        assert!(name("x".repeat(Name::MAX + 1).into()).is_err());
        assert!(name(serde_json::json!(1)).is_err());
        assert_eq!(
            AccessModifier::parse("public"),
            Some(AccessModifier::Public)
        );
        assert_eq!(AccessModifier::parse("internal"), None);
        assert!(serde_json::from_str::<AccessModifier>("\"secret\"").is_err());
    }
}
