//! Tiers, add-on bundles, effective limits and quotas. Not built yet: see issue 4.
