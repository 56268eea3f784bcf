"""A LiteLLM ``custom_auth`` for tests: virtual keys with an alias and a user id, without a
database (LiteLLM keeps its own keys in Postgres). The master key is the proxy admin."""

from __future__ import annotations

import os

from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

#: key -> (key alias, user id)
KEYS = {"sk-support-bot": ("support-bot", "u-support"), "sk-nightly-job": (None, "u-nightly")}


async def user_api_key_auth(request, api_key: str) -> UserAPIKeyAuth:
    key = (api_key or "").removeprefix("Bearer ").strip()
    if key == os.environ.get("LITELLM_MASTER_KEY"):
        return UserAPIKeyAuth(api_key=key, user_role=LitellmUserRoles.PROXY_ADMIN, user_id="admin")
    if key in KEYS:
        alias, user = KEYS[key]
        return UserAPIKeyAuth(api_key=key, key_alias=alias, user_id=user)
    raise Exception("invalid key")
