//! `compliance eval`: rule files checked against many attribute files offline, with
//! the server's limits, into a [`Report`] that the formats render.

use compliance_core::{
    json_text_depth, AttributeLimits, CompileOptions, Evaluation, RegexLimits, Rule, RuleSet,
    Target, Violation, Waivers,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::source::{Source, Syntax};
use super::{bad_input, Failure};

/// The limits of the server, as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `--max-depth` (`COMPLIANCE_MAX_ATTRIBUTE_DEPTH`, 10).
    pub max_depth: usize,
    /// `--max-keys` (`COMPLIANCE_MAX_ATTRIBUTE_KEYS`, 100).
    pub max_keys: usize,
    /// `--max-regex-length` (`COMPLIANCE_MAX_REGEX_LENGTH`, 100).
    pub max_regex_length: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: compliance_core::DEFAULT_MAX_DEPTH,
            max_keys: compliance_core::DEFAULT_MAX_KEYS,
            max_regex_length: RegexLimits::default().max_length,
        }
    }
}

impl Limits {
    fn attributes(&self) -> AttributeLimits {
        AttributeLimits {
            max_depth: self.max_depth,
            max_keys: self.max_keys,
        }
    }
}

/// The rules of one run: as written (for reports) and compiled.
#[derive(Debug)]
pub struct Rules {
    /// In the order of the files and of each file.
    pub list: Vec<Rule>,
    /// Compiled once for every attribute file.
    pub set: RuleSet,
}

impl Rules {
    /// Reads and compiles every rule file (a JSON or YAML array of rules in the API's
    /// form); every problem of every rule is reported at once.
    pub fn load(
        files: &[String],
        limits: &Limits,
        stdin_taken: &mut bool,
    ) -> Result<Self, Failure> {
        if files.is_empty() {
            return Err(bad_input("--rules: give at least one rule file"));
        }
        let mut list: Vec<Rule> = Vec::new();
        for file in files {
            let source = Source::read(file, stdin_taken)?;
            let rules: Vec<Rule> = source.parse()?;
            list.extend(rules);
        }
        let options = CompileOptions {
            regex: RegexLimits {
                max_length: limits.max_regex_length,
                ..RegexLimits::default()
            },
            ..CompileOptions::default()
        };
        let set = RuleSet::compile(list.clone(), &options)
            .map_err(|e| bad_input(format!("rules: {e}")))?;
        Ok(Rules { list, set })
    }

    /// The rule a test names, by id or by name.
    pub fn find(&self, reference: &str) -> Option<&Rule> {
        self.list
            .iter()
            .find(|r| r.key() == reference)
            .or_else(|| self.list.iter().find(|r| r.name == reference))
    }
}

/// How one rule went for one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The rule applied and held.
    Pass,
    /// The rule applied and did not hold (any severity).
    Fail,
    /// The rule is for the other target.
    Skip,
}

impl Outcome {
    /// `pass`, `fail` or `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Skip => "skip",
        }
    }
}

/// One attribute file and its result.
#[derive(Debug)]
pub struct Checked {
    /// The file.
    pub source: Source,
    /// Its evaluation (offline, nothing is waived).
    pub evaluation: Evaluation,
}

impl Checked {
    /// How `rule` went for this file.
    pub fn outcome(&self, rule: &Rule, target: Target) -> Outcome {
        if rule.target != target {
            Outcome::Skip
        } else if self.violation(rule).is_some() {
            Outcome::Fail
        } else {
            Outcome::Pass
        }
    }

    /// `rule`'s violation in this file, if it failed (a rule fails with one: the
    /// predicate that did not hold).
    pub fn violation(&self, rule: &Rule) -> Option<&Violation> {
        self.evaluation
            .violations
            .iter()
            .find(|v| v.rule_id() == rule.key())
    }
}

/// Everything a run found.
#[derive(Debug)]
pub struct Report<'r> {
    /// The target every file was checked as.
    pub target: Target,
    /// The rules, as written.
    pub rules: &'r [Rule],
    /// Each attribute file, in the order given.
    pub files: Vec<Checked>,
}

impl Report<'_> {
    /// Whether any file is blocked (a violation of severity error or critical).
    pub fn blocked(&self) -> bool {
        self.files.iter().any(|f| f.evaluation.blocked)
    }

    /// How many violations there are over every file.
    pub fn violations(&self) -> usize {
        self.files
            .iter()
            .map(|f| f.evaluation.violations.len())
            .sum()
    }
}

/// Checks each file against the rules; the first file that cannot be read, parsed or
/// is over a limit ends the run with its reason.
pub fn check<'r>(
    rules: &'r Rules,
    target: Target,
    files: &[String],
    limits: &Limits,
    stdin_taken: &mut bool,
) -> Result<Report<'r>, Failure> {
    let mut checked = Vec::with_capacity(files.len());
    for file in files {
        let source = Source::read(file, stdin_taken)?;
        let evaluation = evaluate(&rules.set, target, &source, limits)?;
        checked.push(Checked { source, evaluation });
    }
    Ok(Report {
        target,
        rules: &rules.list,
        files: checked,
    })
}

fn evaluate(
    set: &RuleSet,
    target: Target,
    source: &Source,
    limits: &Limits,
) -> Result<Evaluation, Failure> {
    let attribute_limits = limits.attributes();
    if source.syntax() == Syntax::Json {
        // Refused before parsing, with the depth, as the server does.
        let depth = json_text_depth(&source.text);
        if depth > limits.max_depth {
            return Err(bad_input(format!(
                "{}: the document is {depth} deep; at most {} is allowed",
                source.name, limits.max_depth
            )));
        }
    }
    let document: Value = source.parse()?;
    compliance_core::judge(
        Some(set),
        target,
        &document,
        &attribute_limits,
        &Waivers::none(),
    )
    .map_err(|e| bad_input(format!("{}: {e}", source.name)))
}
