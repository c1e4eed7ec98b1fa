-- Every mutating public call: who, what, on which entity, when, and how it
-- ended. Append-only; read by target or by actor, newest first.
-- +goose Up
CREATE TABLE audit_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT    NOT NULL,
    actor_id    TEXT    NOT NULL,
    actor_email TEXT    NOT NULL,
    method      TEXT    NOT NULL,
    target_id   TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    detail      TEXT    NOT NULL
) STRICT;
CREATE INDEX audit_log_target_id_seq ON audit_log (target_id, seq);
CREATE INDEX audit_log_actor_id_seq ON audit_log (actor_id, seq);

-- +goose Down
DROP TABLE audit_log;
