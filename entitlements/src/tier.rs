//! Tiers, features and the dimensions that carry limits (document 2, "Tiers").

use serde::{Deserialize, Serialize};

use crate::limit::Limit;

/// A subscription tier.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Free.
    Developer,
    /// $49 a month.
    Pro,
    /// $149 a month.
    Team,
    /// $399 a month.
    Enterprise,
}

impl Tier {
    /// All four, cheapest first.
    pub const ALL: [Tier; 4] = [Tier::Developer, Tier::Pro, Tier::Team, Tier::Enterprise];

    /// The name used in variable names: `DEVELOPER`, `PRO`, `TEAM`, `ENTERPRISE`.
    pub fn env_name(self) -> &'static str {
        match self {
            Tier::Developer => "DEVELOPER",
            Tier::Pro => "PRO",
            Tier::Team => "TEAM",
            Tier::Enterprise => "ENTERPRISE",
        }
    }

    /// The name as the API spells it: `developer`, `pro`, `team`, `enterprise`.
    ///
    /// ```
    /// use entitlements::Tier;
    /// assert_eq!(Tier::Enterprise.name(), "enterprise");
    /// assert_eq!(Tier::parse(Tier::Pro.name()), Some(Tier::Pro));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Tier::Developer => "developer",
            Tier::Pro => "pro",
            Tier::Team => "team",
            Tier::Enterprise => "enterprise",
        }
    }

    /// Parses a tier name in any case.
    pub fn parse(name: &str) -> Option<Tier> {
        Tier::ALL
            .into_iter()
            .find(|t| t.env_name().eq_ignore_ascii_case(name))
    }
}

/// A feature a tier or a bundle unlocks.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// AI pipeline generation.
    AiPipelineGeneration,
    /// AI plugin generation.
    AiPluginGeneration,
    /// Bulk operations.
    BulkOperations,
    /// The audit log.
    AuditLog,
    /// Custom integrations.
    CustomIntegrations,
    /// Priority support.
    PrioritySupport,
    /// Single sign-on.
    Sso,
}

impl Feature {
    /// The feature's name as the API spells it (`audit_log`, `sso`, ...).
    ///
    /// ```
    /// use entitlements::Feature;
    /// for feature in Feature::ALL {
    ///     assert_eq!(Feature::parse(feature.name()), Some(feature));
    /// }
    /// assert_eq!(Feature::BulkOperations.name(), "bulk_operations");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Feature::AiPipelineGeneration => "ai_pipeline_generation",
            Feature::AiPluginGeneration => "ai_plugin_generation",
            Feature::BulkOperations => "bulk_operations",
            Feature::AuditLog => "audit_log",
            Feature::CustomIntegrations => "custom_integrations",
            Feature::PrioritySupport => "priority_support",
            Feature::Sso => "sso",
        }
    }

    /// The feature a name spells, if any.
    pub fn parse(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Every feature (the system organization has them all).
    pub const ALL: [Feature; 7] = [
        Feature::AiPipelineGeneration,
        Feature::AiPluginGeneration,
        Feature::BulkOperations,
        Feature::AuditLog,
        Feature::CustomIntegrations,
        Feature::PrioritySupport,
        Feature::Sso,
    ];
}

/// A dimension that carries a limit.
///
/// Billing tracks nine quota types; the documents name five of them. Adding one is
/// a variant here and its row in [`Dimension::ALL`] and `info`.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Dimension {
    /// Plugins.
    Plugins,
    /// Pipelines.
    Pipelines,
    /// Member seats (synchronized to the platform, not the quota service).
    Seats,
    /// API calls per period.
    ApiCalls,
    /// AI calls per period.
    AiCalls,
    /// Registry storage, in GB.
    Storage,
}

impl Dimension {
    /// Every dimension.
    pub const ALL: [Dimension; 6] = [
        Dimension::Plugins,
        Dimension::Pipelines,
        Dimension::Seats,
        Dimension::ApiCalls,
        Dimension::AiCalls,
        Dimension::Storage,
    ];

    /// (name in variables, tracked by the quota service)
    fn info(self) -> (&'static str, bool) {
        match self {
            Dimension::Plugins => ("PLUGINS", true),
            Dimension::Pipelines => ("PIPELINES", true),
            Dimension::Seats => ("SEATS", false),
            Dimension::ApiCalls => ("API_CALLS", true),
            Dimension::AiCalls => ("AI_CALLS", true),
            Dimension::Storage => ("STORAGE", true),
        }
    }

    /// The name used in variable names, for example `API_CALLS`.
    pub fn env_name(self) -> &'static str {
        self.info().0
    }

    /// The name on the wire and in storage, for example `apiCalls`.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Plugins => "plugins",
            Dimension::Pipelines => "pipelines",
            Dimension::Seats => "seats",
            Dimension::ApiCalls => "apiCalls",
            Dimension::AiCalls => "aiCalls",
            Dimension::Storage => "storage",
        }
    }

    /// Parses a wire name (`apiCalls`), exactly.
    pub fn from_name(name: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Whether usage counts per calendar month (UTC) and starts again at zero.
    pub fn is_monthly(self) -> bool {
        matches!(self, Dimension::ApiCalls | Dimension::AiCalls)
    }

    /// Whether usage is counted from the inventory (in the transaction of each create
    /// and delete), so that no increment or reset may change it.
    pub fn is_inventory(self) -> bool {
        matches!(self, Dimension::Plugins | Dimension::Pipelines)
    }

    /// Whether the quota service tracks this dimension (seats go to the platform).
    pub fn is_quota_type(self) -> bool {
        self.info().1
    }

    /// Parses a variable-name spelling, in any case.
    pub fn parse(name: &str) -> Option<Dimension> {
        Dimension::ALL
            .into_iter()
            .find(|d| d.env_name().eq_ignore_ascii_case(name))
    }
}

/// What a tier includes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TierPlan {
    /// The tier.
    pub tier: Tier,
    /// The features it unlocks.
    pub features: Vec<Feature>,
    /// Its base limit per dimension, in `Dimension::ALL` order.
    pub limits: [Limit; 6],
    /// Monthly price in cents.
    pub monthly_cents: u64,
}

impl TierPlan {
    /// The plan of document 2's table; apiCalls, aiCalls and storage are unlimited
    /// unless configured.
    pub fn standard(tier: Tier) -> TierPlan {
        use Feature::*;
        let (features, plugins, pipelines, seats, dollars): (Vec<Feature>, u64, u64, u64, u64) =
            match tier {
                Tier::Developer => (vec![], 25, 5, 1, 0),
                Tier::Pro => (
                    vec![
                        AiPipelineGeneration,
                        AiPluginGeneration,
                        BulkOperations,
                        PrioritySupport,
                    ],
                    50,
                    10,
                    1,
                    49,
                ),
                Tier::Team => (
                    vec![
                        AiPipelineGeneration,
                        AiPluginGeneration,
                        BulkOperations,
                        AuditLog,
                        PrioritySupport,
                    ],
                    100,
                    200,
                    10,
                    149,
                ),
                Tier::Enterprise => (
                    vec![
                        AiPipelineGeneration,
                        AiPluginGeneration,
                        BulkOperations,
                        AuditLog,
                        CustomIntegrations,
                        PrioritySupport,
                        Sso,
                    ],
                    250,
                    200,
                    25,
                    399,
                ),
            };
        TierPlan {
            tier,
            features,
            limits: [
                Limit::Finite(plugins),
                Limit::Finite(pipelines),
                Limit::Finite(seats),
                Limit::Unlimited,
                Limit::Unlimited,
                Limit::Unlimited,
            ],
            monthly_cents: dollars * 100,
        }
    }

    /// The base limit of one dimension.
    pub fn limit(&self, dimension: Dimension) -> Limit {
        let index = Dimension::ALL.iter().position(|d| *d == dimension);
        index
            .and_then(|i| self.limits.get(i))
            .copied()
            .unwrap_or(Limit::Unlimited)
    }

    pub(crate) fn set_limit(&mut self, dimension: Dimension, limit: Limit) {
        if let Some(slot) = Dimension::ALL
            .iter()
            .position(|d| *d == dimension)
            .and_then(|i| self.limits.get_mut(i))
        {
            *slot = limit;
        }
    }
}
