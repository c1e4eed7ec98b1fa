-- Time-to-live of experiments (falcon exp create --ttl, interactive
-- slices, falcon exp extend). expires_at is written when a ttl is
-- extended; until then an experiment expires at started_at + ttl_ms.
-- ttl_warned_for is the expiry the 10-minute warning was given for, so a
-- warning is given once per expiry, and again after an extend.
-- +goose Up
ALTER TABLE experiments
    ADD COLUMN ttl_ms         BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN idle_ttl_ms    BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN interactive    BOOLEAN     NOT NULL DEFAULT FALSE,
    ADD COLUMN expires_at     DATETIME(6) NULL,
    ADD COLUMN active_at      DATETIME(6) NULL,
    ADD COLUMN ttl_warned_for DATETIME(6) NULL;

-- +goose Down
ALTER TABLE experiments
    DROP COLUMN ttl_ms,
    DROP COLUMN idle_ttl_ms,
    DROP COLUMN interactive,
    DROP COLUMN expires_at,
    DROP COLUMN active_at,
    DROP COLUMN ttl_warned_for;
