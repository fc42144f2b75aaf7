//! The eight add-on bundles of document 3.

use serde::{Deserialize, Serialize};

use crate::tier::{Dimension, Feature, Tier};

/// A bundle's identifier.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BundleId {
    /// +5 member seats.
    SeatPack,
    /// +10 pipelines.
    PipelinePack,
    /// +100 plugins.
    PluginPack,
    /// +1,000,000 API calls per period.
    ApiPack,
    /// +5,000 AI calls per period.
    AiPack,
    /// +50 GB registry storage.
    StoragePack,
    /// Unlocks the audit log.
    AuditLog,
    /// Unlocks sso and up to 5 identity-provider configurations.
    Sso,
}

impl BundleId {
    /// All eight.
    pub const ALL: [BundleId; 8] = [
        BundleId::SeatPack,
        BundleId::PipelinePack,
        BundleId::PluginPack,
        BundleId::ApiPack,
        BundleId::AiPack,
        BundleId::StoragePack,
        BundleId::AuditLog,
        BundleId::Sso,
    ];

    /// The id as written in variables and on the wire: `SEAT_PACK`.
    pub fn as_str(self) -> &'static str {
        match self {
            BundleId::SeatPack => "SEAT_PACK",
            BundleId::PipelinePack => "PIPELINE_PACK",
            BundleId::PluginPack => "PLUGIN_PACK",
            BundleId::ApiPack => "API_PACK",
            BundleId::AiPack => "AI_PACK",
            BundleId::StoragePack => "STORAGE_PACK",
            BundleId::AuditLog => "AUDIT_LOG",
            BundleId::Sso => "SSO",
        }
    }

    /// Parses an id in any case.
    pub fn parse(text: &str) -> Option<BundleId> {
        BundleId::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(text))
    }
}

impl std::fmt::Display for BundleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one unit of a bundle grants.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Grant {
    /// Raises one dimension's limit.
    Limit {
        /// The dimension raised.
        dimension: Dimension,
        /// By how much, per unit.
        amount: u64,
    },
    /// Unlocks a feature.
    Feature {
        /// The feature.
        feature: Feature,
    },
}

/// How many identity-provider configurations the SSO bundle allows.
pub const SSO_IDP_CONFIGURATIONS: u32 = 5;

/// A bundle as offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Its id.
    pub id: BundleId,
    /// What one unit grants.
    pub grant: Grant,
    /// Monthly price in cents.
    pub monthly_cents: u64,
    /// Annual price in cents (10x monthly unless configured).
    pub annual_cents: u64,
    /// The tiers that may buy it.
    pub eligible_tiers: Vec<Tier>,
    /// Whether several units may be bought.
    pub stackable: bool,
}

impl Bundle {
    /// The bundle of document 3's table.
    pub fn standard(id: BundleId) -> Bundle {
        let limit = |dimension, amount| Grant::Limit { dimension, amount };
        let (grant, dollars, eligible, stackable) = match id {
            BundleId::SeatPack => (limit(Dimension::Seats, 5), 25, Tier::ALL.to_vec(), true),
            BundleId::PipelinePack => (
                limit(Dimension::Pipelines, 10),
                15,
                Tier::ALL.to_vec(),
                true,
            ),
            BundleId::PluginPack => (limit(Dimension::Plugins, 100), 15, Tier::ALL.to_vec(), true),
            BundleId::ApiPack => (
                limit(Dimension::ApiCalls, 1_000_000),
                20,
                Tier::ALL.to_vec(),
                true,
            ),
            BundleId::AiPack => (
                limit(Dimension::AiCalls, 5_000),
                75,
                Tier::ALL.to_vec(),
                true,
            ),
            BundleId::StoragePack => (limit(Dimension::Storage, 50), 25, Tier::ALL.to_vec(), true),
            BundleId::AuditLog => (
                Grant::Feature {
                    feature: Feature::AuditLog,
                },
                20,
                vec![Tier::Pro],
                false,
            ),
            BundleId::Sso => (
                Grant::Feature {
                    feature: Feature::Sso,
                },
                40,
                vec![Tier::Pro, Tier::Team],
                false,
            ),
        };
        Bundle {
            id,
            grant,
            monthly_cents: dollars * 100,
            annual_cents: dollars * 100 * 10,
            eligible_tiers: eligible,
            stackable,
        }
    }
}
