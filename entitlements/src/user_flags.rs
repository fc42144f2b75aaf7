//! A user's own feature flags, set by a platform administrator from a fixed catalog:
//! the tier features (a flag can take one away from the user, never give the user
//! one the organization's tier and bundles lack) and the preview features (opened
//! for one user at a time before they are anyone's).
//!
//! ```
//! use std::collections::BTreeSet;
//! use entitlements::*;
//! let flags = check_user_flags(&[("audit_log", false), ("dashboards", true)]).unwrap();
//! let org: BTreeSet<Feature> = [Feature::AuditLog, Feature::Sso].into();
//! assert_eq!(effective_user_features(&org, &flags), ["dashboards", "sso"]);
//! // `true` on a tier feature only undoes a take-away: it never opens one.
//! let flags = check_user_flags(&[("bulk_operations", true)]).unwrap();
//! assert!(!effective_user_features(&org, &flags).contains(&"bulk_operations"));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use crate::Feature;

/// The preview features a user can be given before they are anyone's.
pub const PREVIEW_FEATURES: [&str; 2] = ["alerts", "dashboards"];

/// Why a set of flags is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// A name outside the catalog.
    #[error("`{0}` is not a feature of the catalog (the tier features, and the preview features {previews})", previews = PREVIEW_FEATURES.join(", "))]
    Unknown(String),
}

/// One flag of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UserFlag {
    /// A tier feature: `false` takes it away from the user.
    Tier(Feature),
    /// A preview feature: `true` opens it for the user.
    Preview(&'static str),
}

impl UserFlag {
    /// The flag a name spells.
    pub fn parse(name: &str) -> Result<UserFlag, FlagError> {
        if let Some(feature) = Feature::parse(name) {
            return Ok(UserFlag::Tier(feature));
        }
        PREVIEW_FEATURES
            .iter()
            .find(|p| **p == name)
            .map(|p| UserFlag::Preview(p))
            .ok_or_else(|| FlagError::Unknown(name.to_owned()))
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            UserFlag::Tier(feature) => feature.name(),
            UserFlag::Preview(name) => name,
        }
    }
}

/// A user's checked flags: what each catalog entry is set to.
pub type UserFlags = BTreeMap<UserFlag, bool>;

/// Checks flags by name (the last of a repeated name wins); an unknown name refuses
/// them all.
pub fn check_user_flags<'a>(
    flags: impl IntoIterator<Item = &'a (impl AsRef<str> + 'a, bool)>,
) -> Result<UserFlags, FlagError> {
    flags
        .into_iter()
        .map(|(name, on)| Ok((UserFlag::parse(name.as_ref())?, *on)))
        .collect()
}

/// Whether the user may use a tier feature the organization has: not when a flag
/// took it away.
pub fn user_keeps(flags: &UserFlags, feature: Feature) -> bool {
    flags.get(&UserFlag::Tier(feature)) != Some(&false)
}

/// The features a user has, by name, sorted: the organization's (`org`, from its
/// tier and bundles) less those a flag took away, and the previews opened for the
/// user.
pub fn effective_user_features(org: &BTreeSet<Feature>, flags: &UserFlags) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = org
        .iter()
        .filter(|f| user_keeps(flags, **f))
        .map(|f| f.name())
        .chain(flags.iter().filter_map(|(flag, on)| match flag {
            UserFlag::Preview(name) if *on => Some(*name),
            _ => None,
        }))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_are_refused() {
        assert_eq!(
            check_user_flags(&[("sso", false), ("teleport", true)]),
            Err(FlagError::Unknown("teleport".into()))
        );
        assert_eq!(
            UserFlag::parse("Audit_Log"),
            Err(FlagError::Unknown("Audit_Log".into()))
        );
    }

    #[test]
    fn a_flag_never_opens_a_tier_feature() {
        let org = BTreeSet::new();
        for feature in Feature::ALL {
            let flags = check_user_flags(&[(feature.name(), true)]).unwrap();
            assert!(effective_user_features(&org, &flags).is_empty());
        }
    }

    #[test]
    fn previews_open_and_tier_features_go() {
        let org: BTreeSet<Feature> = Feature::ALL.into();
        let flags =
            check_user_flags(&[("sso", false), ("alerts", true), ("dashboards", false)]).unwrap();
        let names = effective_user_features(&org, &flags);
        assert!(!names.contains(&"sso"));
        assert!(names.contains(&"alerts"));
        assert!(!names.contains(&"dashboards"));
        assert_eq!(names.len(), Feature::ALL.len());
        assert!(!user_keeps(&flags, Feature::Sso));
        assert!(user_keeps(&flags, Feature::AuditLog));
    }
}
