//! A limit: a finite number, or unlimited. On the wire, unlimited is -1.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A cap on a dimension. Inside the crate never a bare -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// At most this many.
    Finite(u64),
    /// No cap.
    Unlimited,
}

impl Limit {
    /// Parses the wire form: -1 is unlimited, a non-negative number is finite.
    pub fn from_wire(n: i64) -> Option<Limit> {
        match n {
            -1 => Some(Limit::Unlimited),
            n if n >= 0 => Some(Limit::Finite(n.unsigned_abs())),
            _ => None,
        }
    }

    /// The wire form: -1 for unlimited (a finite value beyond i64 is clamped).
    pub fn to_wire(self) -> i64 {
        match self {
            Limit::Unlimited => -1,
            Limit::Finite(n) => i64::try_from(n).unwrap_or(i64::MAX),
        }
    }

    /// This limit raised by `amount`; unlimited stays unlimited.
    pub fn raised_by(self, amount: u64) -> Limit {
        match self {
            Limit::Unlimited => Limit::Unlimited,
            Limit::Finite(n) => Limit::Finite(n.saturating_add(amount)),
        }
    }

    /// Whether `used` is within the limit.
    pub fn allows(self, used: u64) -> bool {
        match self {
            Limit::Unlimited => true,
            Limit::Finite(n) => used <= n,
        }
    }
}

/// The schema of a limit's wire form: an integer, -1 for unlimited.
#[cfg(feature = "schema")]
impl utoipa::PartialSchema for Limit {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::Integer)
            .minimum(Some(-1))
            .description(Some("-1 is unlimited"))
            .into()
    }
}

#[cfg(feature = "schema")]
impl utoipa::ToSchema for Limit {}

impl Serialize for Limit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i64(self.to_wire())
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(deserializer)?;
        Limit::from_wire(n)
            .ok_or_else(|| serde::de::Error::custom("a limit is -1 or a non-negative integer"))
    }
}
