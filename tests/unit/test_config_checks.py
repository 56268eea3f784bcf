"""Configuration that cannot be silently wrong (issue 20): URLs checked at start-up with an
error naming the setting."""

from __future__ import annotations

import pytest

from sjf_core.config import SchedulerConfig


@pytest.mark.parametrize("url", ["localhost:6379", "127.0.0.1:6379/0", "redis://localhost:port/0",
                                 "user:secret@localhost:6379"])
def test_a_redis_url_that_cannot_work_names_sjf_redis_url(url):
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_REDIS_URL": url})
    msg = str(info.value)
    assert msg.startswith("bad SJF setting SJF_REDIS_URL: ") and "secret" not in msg


def test_a_redis_url_in_the_file_names_the_file_and_key(tmp_path):
    f = tmp_path / "sjf.json"
    f.write_text('{"redis_url": "localhost:6379"}')
    with pytest.raises(ValueError, match=f"SJF_CONFIG file {f}: 'redis_url'.*redis://"):
        SchedulerConfig.from_env({"SJF_CONFIG": str(f)})


@pytest.mark.parametrize("url", ["redis://localhost:6379/0", "rediss://h:6380", "redis:///0", "unix:///tmp/r.sock"])
def test_redis_urls_redis_py_accepts_pass(url):
    assert SchedulerConfig.from_env({"SJF_REDIS_URL": url}).redis_url == url
