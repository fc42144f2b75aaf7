//! Organizations, teams, roles, permissions and the permission gate. Not built yet: see issue 5.
