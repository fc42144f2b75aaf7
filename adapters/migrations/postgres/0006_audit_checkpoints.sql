-- Signed checkpoints of the audit chains: the signed note as text, with the chain,
-- seq and head hash it states. One per (chain, seq): two replicas cannot both sign one.
CREATE TABLE audit_checkpoints (
    chain_key TEXT NOT NULL,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL,
    signed_at TEXT NOT NULL,
    note TEXT NOT NULL,
    PRIMARY KEY (chain_key, seq)
);
