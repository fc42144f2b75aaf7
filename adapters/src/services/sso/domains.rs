//! Claimed e-mail domains, proven by a TXT record.

use super::*;
use crate::outbound::oidc::SsoClients;
use crate::storage::Store;

/// An organization's claimed domains.
pub async fn domains(store: &Store, org: &OrgRecord) -> ServiceResult<Vec<DomainRow>> {
    root_only(org)?;
    Ok(store.domains(&org.id).await?)
}

/// Claims a domain: answers the TXT record that proves it.
pub async fn claim_domain(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    domain: &str,
    now: DateTime<Utc>,
) -> ServiceResult<DomainRow> {
    root_only(org)?;
    let domain = rules::claimable_domain(domain)
        .map_err(|e| ServiceError::invalid("domain", e.to_string()))?;
    if store.domains(&org.id).await?.len() >= rules::MAX_DOMAINS {
        return Err(ServiceError::Conflict(format!(
            "an organization claims at most {} domains",
            rules::MAX_DOMAINS
        )));
    }
    let row = DomainRow {
        org_id: org.id.clone(),
        domain,
        token: hex::encode(accounts::random::<16>()?),
        created_at: now,
        verified_at: None,
        checked_at: None,
    };
    unit_of_work!(store, |tx| {
        tx.insert_domain(&row).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "org.domain.claim",
            (&org.id, Some(&org.id)),
            ("domain", &row.domain),
            json!({"domain": row.domain}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(row)
}

/// Verifies a claimed domain by its TXT record. Not found: 400 naming the record
/// to publish, nothing changed; verified by another organization: 409.
pub async fn verify_domain(
    store: &Store,
    sso: &SsoClients,
    caller: &Caller,
    org: &OrgRecord,
    domain: &str,
    now: DateTime<Utc>,
) -> ServiceResult<DomainRow> {
    root_only(org)?;
    let domain = domain.trim().to_ascii_lowercase();
    let row = store
        .domains(&org.id)
        .await?
        .into_iter()
        .find(|d| d.domain == domain)
        .ok_or(ServiceError::NotFound("domain".into()))?;
    if row.verified_at.is_some() {
        return Ok(row);
    }
    let name = rules::txt_record_name(&row.domain);
    let records = sso.txt().txt(&name).await.map_err(|why| {
        ServiceError::StoreUnavailable(format!("the TXT lookup of {name} failed: {why}"))
    })?;
    if !rules::txt_proves(records.iter().map(String::as_str), &row.token) {
        return Err(ServiceError::invalid(
            "domain",
            format!(
                "no TXT record `{name}` carries `{}`: publish it, then verify again",
                rules::txt_record_value(&row.token)
            ),
        ));
    }
    unit_of_work!(store, |tx| {
        tx.domain_checked((&org.id, &row.domain), true, now).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "org.domain.verify",
            (&org.id, Some(&org.id)),
            ("domain", &row.domain),
            json!({"domain": row.domain}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(DomainRow {
        verified_at: Some(now),
        checked_at: Some(now),
        ..row
    })
}

/// Gives up a claimed domain.
pub async fn remove_domain(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    domain: &str,
) -> ServiceResult<()> {
    let domain = domain.trim().to_ascii_lowercase();
    unit_of_work!(store, |tx| {
        if !tx.delete_domain(&org.id, &domain).await? {
            return Err(ServiceError::NotFound("domain".into()));
        }
        tx.enqueue_audit(&[event_on(
            caller,
            "org.domain.delete",
            (&org.id, Some(&org.id)),
            ("domain", &domain),
            json!({"domain": domain}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(())
}
