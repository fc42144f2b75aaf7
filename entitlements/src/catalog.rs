//! The catalog in force: tier plans and bundles after configuration overrides.
//!
//! Overrides arrive as key/value pairs (the server passes its environment); the
//! crate reads no environment itself. Recognized keys:
//!
//! | key | value |
//! |---|---|
//! | `QUOTA_TIER_<TIER>_<LIMIT>` | integer, -1 for unlimited; LIMIT one of PLUGINS, PIPELINES, SEATS, API_CALLS, AI_CALLS, STORAGE |
//! | `BILLING_PLAN_<TIER>_MONTHLY` | cents, non-negative integer |
//! | `BILLING_BUNDLE_<ID>_MONTHLY`, `_ANNUAL` | cents, non-negative integer; annual defaults to 10x the monthly in force |
//! | `BILLING_BUNDLE_<ID>_GRANT` | positive integer; single-dimension bundles only |
//! | `BILLING_BUNDLE_<ID>_TIERS` | JSON array of tier names, for example `["pro","team"]` |
//! | `BILLING_BUNDLES_ENABLED` | `true` or `false` (default false) |
//!
//! Any other key with one of these prefixes is an error, so that a misspelt
//! variable is reported rather than silently ignored.

use serde::Serialize;

use crate::bundle::{Bundle, BundleId, Grant};
use crate::limit::Limit;
use crate::tier::{Dimension, Tier, TierPlan};

/// A configuration value that cannot be used; names the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    /// The variable at fault.
    pub variable: String,
    /// What is wrong with it.
    pub message: String,
}

/// Tier plans and bundles in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalog {
    /// One plan per tier, in `Tier::ALL` order.
    pub tiers: [TierPlan; 4],
    /// One entry per bundle, in `BundleId::ALL` order.
    pub bundles: Vec<Bundle>,
    /// Whether bundles are offered at all.
    pub bundles_enabled: bool,
    /// Features every tier has (`FEATURES_FOR_ALL_TIERS`, a comma-separated list of
    /// feature names), so that a deployment can keep what it offered before features
    /// were gated.
    pub features_for_all: std::collections::BTreeSet<crate::Feature>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            tiers: Tier::ALL.map(TierPlan::standard),
            bundles: BundleId::ALL.into_iter().map(Bundle::standard).collect(),
            bundles_enabled: false,
            features_for_all: std::collections::BTreeSet::new(),
        }
    }
}

const PREFIXES: [&str; 5] = [
    "QUOTA_TIER_",
    "BILLING_PLAN_",
    "BILLING_BUNDLE_",
    "BILLING_BUNDLES_ENABLED",
    "FEATURES_FOR_ALL_TIERS",
];

impl Catalog {
    /// The documents' catalog with `overrides` applied. Keys without one of the
    /// recognized prefixes are ignored; every problem is reported, not just the first.
    ///
    /// ```
    /// use entitlements::{Catalog, Dimension, Limit, Tier};
    /// let catalog = Catalog::from_overrides([
    ///     ("QUOTA_TIER_PRO_API_CALLS", "100000"),
    ///     ("BILLING_BUNDLES_ENABLED", "true"),
    ///     ("PATH", "/usr/bin"),
    /// ]).unwrap();
    /// assert_eq!(catalog.plan(Tier::Pro).limit(Dimension::ApiCalls), Limit::Finite(100_000));
    /// assert!(Catalog::from_overrides([("BILLING_BUNDLE_SSO_GRANT", "3")]).is_err());
    /// ```
    pub fn from_overrides<K, V>(
        overrides: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Catalog, Vec<ConfigError>>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut catalog = Catalog::default();
        let mut errors = Vec::new();
        let mut annual_overridden = Vec::new();
        let mut pairs: Vec<(String, String)> = overrides
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .filter(|(k, _)| PREFIXES.iter().any(|p| k.starts_with(p)))
            .collect();
        // Monthly prices before annual ones, so the 10x default follows an override.
        pairs.sort_by_key(|(k, _)| k.ends_with("_ANNUAL"));
        for (key, value) in pairs {
            let error = |message: String| ConfigError {
                variable: key.clone(),
                message,
            };
            if let Err(message) = catalog.apply(&key, value.trim(), &mut annual_overridden) {
                errors.push(error(message));
            }
        }
        if errors.is_empty() {
            Ok(catalog)
        } else {
            Err(errors)
        }
    }

    fn apply(
        &mut self,
        key: &str,
        value: &str,
        annual_overridden: &mut Vec<BundleId>,
    ) -> Result<(), String> {
        if key == "BILLING_BUNDLES_ENABLED" {
            self.bundles_enabled = parse_bool(value)?;
            return Ok(());
        }
        if key == "FEATURES_FOR_ALL_TIERS" {
            for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let feature = crate::Feature::parse(name).ok_or_else(|| {
                    let names: Vec<&str> = crate::Feature::ALL.iter().map(|f| f.name()).collect();
                    format!(
                        "`{name}` is not a feature; the features are {}",
                        names.join(", ")
                    )
                })?;
                self.features_for_all.insert(feature);
            }
            return Ok(());
        }
        if let Some(rest) = key.strip_prefix("QUOTA_TIER_") {
            let (tier, dimension) = split_known(rest, Tier::parse, Dimension::parse)
                .ok_or("unknown tier or limit name")?;
            let n: i64 = value
                .parse()
                .map_err(|_| format!("`{value}` is not an integer"))?;
            let limit =
                Limit::from_wire(n).ok_or("a limit is -1 (unlimited) or a non-negative integer")?;
            self.plan_mut(tier).set_limit(dimension, limit);
            return Ok(());
        }
        if let Some(rest) = key.strip_prefix("BILLING_PLAN_") {
            let tier = rest
                .strip_suffix("_MONTHLY")
                .and_then(Tier::parse)
                .ok_or("expected BILLING_PLAN_<TIER>_MONTHLY")?;
            self.plan_mut(tier).monthly_cents = cents(value)?;
            return Ok(());
        }
        if let Some(rest) = key.strip_prefix("BILLING_BUNDLE_") {
            let (id, setting) = BundleId::ALL
                .into_iter()
                .find_map(|id| {
                    rest.strip_prefix(id.as_str())
                        .and_then(|s| s.strip_prefix('_'))
                        .map(|setting| (id, setting))
                })
                .ok_or("unknown bundle id")?;
            let bundle = self.bundle_mut(id).ok_or("unknown bundle id")?;
            match setting {
                "MONTHLY" => {
                    bundle.monthly_cents = cents(value)?;
                    if !annual_overridden.contains(&id) {
                        bundle.annual_cents = bundle.monthly_cents.saturating_mul(10);
                    }
                }
                "ANNUAL" => {
                    bundle.annual_cents = cents(value)?;
                    annual_overridden.push(id);
                }
                "GRANT" => match &mut bundle.grant {
                    Grant::Limit { amount, .. } => {
                        *amount = value
                            .parse::<u64>()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or(format!("`{value}` is not a positive integer"))?;
                    }
                    Grant::Feature { .. } => {
                        return Err(format!(
                            "{id} unlocks a feature; it has no grant to override"
                        ));
                    }
                },
                "TIERS" => {
                    let names: Vec<String> = serde_json::from_str(value)
                        .map_err(|_| format!("`{value}` is not a JSON array of tier names"))?;
                    let mut tiers = Vec::new();
                    for name in names {
                        let tier = Tier::parse(&name).ok_or(format!("unknown tier `{name}`"))?;
                        if !tiers.contains(&tier) {
                            tiers.push(tier);
                        }
                    }
                    bundle.eligible_tiers = tiers;
                }
                other => return Err(format!("unknown bundle setting `{other}`")),
            }
            return Ok(());
        }
        Err("unknown variable".to_owned())
    }

    /// The plan of a tier.
    pub fn plan(&self, tier: Tier) -> &TierPlan {
        let [developer, pro, team, enterprise] = &self.tiers;
        match tier {
            Tier::Developer => developer,
            Tier::Pro => pro,
            Tier::Team => team,
            Tier::Enterprise => enterprise,
        }
    }

    fn plan_mut(&mut self, tier: Tier) -> &mut TierPlan {
        let [developer, pro, team, enterprise] = &mut self.tiers;
        match tier {
            Tier::Developer => developer,
            Tier::Pro => pro,
            Tier::Team => team,
            Tier::Enterprise => enterprise,
        }
    }

    /// A bundle as offered.
    pub fn bundle(&self, id: BundleId) -> Option<&Bundle> {
        self.bundles.iter().find(|b| b.id == id)
    }

    fn bundle_mut(&mut self, id: BundleId) -> Option<&mut Bundle> {
        self.bundles.iter_mut().find(|b| b.id == id)
    }
}

fn split_known<A, B>(
    text: &str,
    first: impl Fn(&str) -> Option<A>,
    second: impl Fn(&str) -> Option<B>,
) -> Option<(A, B)> {
    text.match_indices('_').find_map(|(i, _)| {
        let (a, b) = (text.get(..i)?, text.get(i + 1..)?);
        Some((first(a)?, second(b)?))
    })
}

fn cents(value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .map_err(|_| format!("`{value}` is not a non-negative number of cents"))
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(format!("`{value}` is not true or false")),
    }
}
