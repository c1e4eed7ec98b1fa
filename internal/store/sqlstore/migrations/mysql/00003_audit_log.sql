-- Every mutating public call: who, what, on which entity, when, and how it
-- ended. Append-only; read by target or by actor, newest first.
-- +goose Up
CREATE TABLE audit_log (
    seq         BIGINT        NOT NULL AUTO_INCREMENT,
    at          DATETIME(6)   NOT NULL,
    actor_id    VARCHAR(255)  NOT NULL,
    actor_email VARCHAR(255)  NOT NULL,
    method      VARCHAR(255)  NOT NULL,
    target_id   VARCHAR(255)  NOT NULL,
    outcome     VARCHAR(64)   NOT NULL,
    detail      TEXT          NOT NULL,
    PRIMARY KEY (seq),
    KEY audit_log_target_id_seq (target_id, seq),
    KEY audit_log_actor_id_seq (actor_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE audit_log;
