-- Every change of an experiment and its jobs (status, reason, message,
-- node pool; TTL warnings and extensions; exec sessions), for `falcon exp
-- events`, `exp wait` and `exp get -w`. Events are numbered per experiment:
-- last_event_seq is the experiment's last number, incremented under the
-- experiment's row lock in the transaction that writes the change, so
-- numbers commit in order and a watcher resuming after seq N misses
-- nothing. The store keeps the newest 1000 per experiment
-- (store.MaxEventsPerExp).
-- +goose Up
ALTER TABLE experiments ADD COLUMN last_event_seq BIGINT NOT NULL DEFAULT 0;

CREATE TABLE exp_events (
    exp_id    VARCHAR(128) NOT NULL,
    seq       BIGINT       NOT NULL,
    at        DATETIME(6)  NOT NULL,
    kind      VARCHAR(16)  NOT NULL,
    entity_id VARCHAR(128) NOT NULL,
    status    VARCHAR(32)  NOT NULL,
    reason    VARCHAR(128) NOT NULL,
    message   TEXT         NOT NULL, -- at most 4096 bytes (store.MaxEventMessage)
    detail    TEXT         NOT NULL, -- JSON object of strings
    PRIMARY KEY (exp_id, seq),
    CONSTRAINT exp_events_exp_fk FOREIGN KEY (exp_id) REFERENCES experiments (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE exp_events;
ALTER TABLE experiments DROP COLUMN last_event_seq;
