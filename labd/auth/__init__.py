"""Who may use the lab: principals and roles, signed MQTT messages, credentials, broker
accounts and their topics, rate limits and the audit trail."""

from labd.auth.acl import Rule, mosquitto_acl, permits, replies_prefix, rules_for
from labd.auth.audit import ANONYMOUS, Audit
from labd.auth.credentials import (
    LOCAL_FILE,
    Credentials,
    ensure_local_credentials,
    find_credentials,
    new_credentials,
    read_credentials,
)
from labd.auth.limits import RateLimiter
from labd.auth.passwords import check_password, hash_password
from labd.auth.principals import (
    Action,
    Principal,
    Principals,
    Role,
    from_settings,
    token_digest,
)
from labd.auth.redaction import redact_job, redact_params, redact_spec, spec_secrets
from labd.auth.signing import (
    NONCE_MAX,
    NONCE_MIN,
    PRINCIPAL_MAX,
    SIGNATURE_MAX,
    Signed,
    sign,
    verify,
)
from labd.model import KEY_ID_PATTERN, key_id_problem

__all__ = [
    "ANONYMOUS",
    "KEY_ID_PATTERN",
    "LOCAL_FILE",
    "NONCE_MAX",
    "NONCE_MIN",
    "PRINCIPAL_MAX",
    "SIGNATURE_MAX",
    "Action",
    "Audit",
    "Credentials",
    "Principal",
    "Principals",
    "RateLimiter",
    "Role",
    "Rule",
    "Signed",
    "check_password",
    "ensure_local_credentials",
    "find_credentials",
    "from_settings",
    "hash_password",
    "key_id_problem",
    "mosquitto_acl",
    "new_credentials",
    "permits",
    "read_credentials",
    "redact_job",
    "redact_params",
    "redact_spec",
    "replies_prefix",
    "rules_for",
    "sign",
    "spec_secrets",
    "token_digest",
    "verify",
]
