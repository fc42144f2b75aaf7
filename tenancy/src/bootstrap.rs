//! The fresh-install bootstrap: only an identifier listed in
//! `BOOTSTRAP_SUPERADMIN_EMAILS` may create the system organization.

use crate::error::TenancyError;

/// The bootstrap allow-list, parsed from the variable's value (comma or white-space
/// separated identifiers, matched case-insensitively).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootstrapList {
    identifiers: Vec<String>,
}

impl BootstrapList {
    /// Parses the variable's value; empty entries are ignored.
    ///
    /// ```
    /// use tenancy::BootstrapList;
    /// let list = BootstrapList::parse(" Root@Example.com, ops@example.com ");
    /// assert!(list.allows("root@example.COM"));
    /// assert!(!list.allows("eve@example.com"));
    /// ```
    pub fn parse(value: &str) -> Self {
        BootstrapList {
            identifiers: value
                .split(|c: char| c == ',' || c.is_whitespace())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_lowercase)
                .collect(),
        }
    }

    /// Whether `identifier` is listed.
    pub fn allows(&self, identifier: &str) -> bool {
        let identifier = identifier.trim().to_lowercase();
        !identifier.is_empty() && self.identifiers.contains(&identifier)
    }

    /// Whether the list is empty (then no super-admin can ever be made).
    pub fn is_empty(&self) -> bool {
        self.identifiers.is_empty()
    }
}

/// Decides a request to create the system organization: it must not exist yet, and
/// the caller must be a bootstrap identifier. On success the caller becomes a
/// super-admin and the system organization's Owner.
pub fn check_bootstrap(
    list: &BootstrapList,
    email: &str,
    system_exists: bool,
) -> Result<(), TenancyError> {
    if system_exists {
        return Err(TenancyError::SystemExists);
    }
    if list.allows(email) {
        Ok(())
    } else {
        Err(TenancyError::NotBootstrapIdentifier)
    }
}
