//! The effective rule set of an organization (SEMANTICS.md 1.6), as a pure function
//! over the sources the caller loaded.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::rule::{Rule, Scope};

/// What kind of organization the rules are gathered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrganizationKind {
    /// The reserved system organization: its own entities are never evaluated.
    System,
    /// A root organization.
    Root,
    /// A team nested under a root organization: it inherits propagated rules.
    Team,
}

/// An organization's subscription to a published rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// The published rule.
    pub rule_id: String,
    /// Only active subscriptions are enforced.
    pub active: bool,
    /// The version pinned, or none to follow the latest published version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_version: Option<u32>,
}

/// Everything the effective set is made from. The caller leaves soft-deleted rules out.
#[derive(Debug, Clone, Copy)]
pub struct RuleSources<'a> {
    /// The organization's kind.
    pub organization: OrganizationKind,
    /// The organization's own rules.
    pub own_rules: &'a [Rule],
    /// The organization's subscriptions.
    pub subscriptions: &'a [Subscription],
    /// The published rules the subscriptions may name, at every stored version.
    pub published_versions: &'a [Rule],
    /// For a team: its parent organization's rules (only those with
    /// `propagateToChildren` are taken).
    pub parent_rules: &'a [Rule],
}

/// The rules enforced on an organization's entities, each rule once: its own rules,
/// then its active subscriptions (at the pinned version when pinned, else the latest;
/// a pin whose version is no longer stored falls back to the latest, so that a rule
/// is never silently dropped), then its parent's propagated rules when it is a team.
/// Template rules are never enforced. The system organization gets none.
///
/// ```
/// use compliance_core::{effective_rules, OrganizationKind, RuleSources, Rule};
/// let own: Vec<Rule> = serde_json::from_str(r#"[{"id": "r1", "name": "a",
///   "target": "plugin", "severity": "error", "field": "x", "operator": "exists"}]"#).unwrap();
/// let sources = RuleSources {
///     organization: OrganizationKind::Root, own_rules: &own, subscriptions: &[],
///     published_versions: &[], parent_rules: &[],
/// };
/// assert_eq!(effective_rules(&sources).len(), 1);
/// let system = RuleSources { organization: OrganizationKind::System, ..sources };
/// assert!(effective_rules(&system).is_empty());
/// ```
pub fn effective_rules<'a>(sources: &RuleSources<'a>) -> Vec<Rule> {
    if sources.organization == OrganizationKind::System {
        return Vec::new();
    }
    let subscribed = sources
        .subscriptions
        .iter()
        .filter(|s| s.active)
        .filter_map(|s| published_version(sources.published_versions, s));
    let propagated = sources
        .parent_rules
        .iter()
        .filter(|r| sources.organization == OrganizationKind::Team && r.propagate_to_children);
    let mut seen: HashSet<&'a str> = HashSet::new();
    sources
        .own_rules
        .iter()
        .chain(subscribed)
        .chain(propagated)
        .filter(|rule| !rule.is_template && seen.insert(rule.key()))
        .cloned()
        .collect()
}

fn published_version<'a>(versions: &'a [Rule], subscription: &Subscription) -> Option<&'a Rule> {
    let mut candidates = versions
        .iter()
        .filter(|r| r.scope == Scope::Published && r.key() == subscription.rule_id);
    let pinned = subscription
        .pinned_version
        .and_then(|v| candidates.clone().find(|r| r.version == v));
    pinned.or_else(|| candidates.by_ref().max_by_key(|r| r.version))
}
