"""Box settings (issue 28) that a fresh user gets wrong are said, not silently ignored: a box
setting keyed on a URL that no deployment uses, or naming a model that no deployment on that box
serves, is a start-up warning; errors name the variable the value came from; a value that is
not JSON, and a misspelt kind or key, get the shape expected and the closest known word. Pure:
the settings composition and the start-up checks on a model list (no proxy)."""

from __future__ import annotations

import pytest

from sjf_core.config import SchedulerConfig

BOX = "http://127.0.0.1:11434"


def _model_list(*deployments: tuple[str, str]) -> dict:
    return {"general_settings": {"cancel_on_disconnect": True},
            "model_list": [{"model_name": m.split("/")[-1], "litellm_params": {"model": m, "api_base": base}}
                           for m, base in deployments]}


def _warnings(env: dict, config: dict) -> list[str]:
    from litellm_sjf._startup import config_warnings
    from litellm_sjf.settings import load_settings

    return config_warnings(load_settings(env), config)


OLLAMA = _model_list(("ollama_chat/qwen2.5:7b", BOX), ("openai/qwen2.5-coder:1.5b", BOX + "/v1"))


# ---- 1. a box setting that can take no effect is a start-up warning ---------------------------
@pytest.mark.parametrize("url", ["http://localhost:11434/v1/", "http://localhost:11434", "http://127.0.0.1:11434/v1",
                                 "http://[::1]:11434/"])
def test_a_box_setting_on_any_spelling_of_a_deployment_s_url_is_not_warned(url):
    env = {"SJF_BACKEND_BOX": f'{{"{url}": {{"kind": "serial", "models": {{"qwen2.5:7b": {{"slots": 2}}}}}}}}'}
    assert _warnings(env, OLLAMA) == []


def test_sjf_backend_box_on_a_wrong_port_is_a_warning_naming_the_setting_and_the_url():
    env = {"SJF_BACKEND_BOX": '{"http://localhost:11435/v1/": {"kind": "serial"}}'}
    (w,) = _warnings(env, OLLAMA)
    assert w.startswith("SJF_BACKEND_BOX: backend http://localhost:11435/v1/ matches no deployment's api_base"), w
    assert "http://127.0.0.1:11434/v1" in w  # the backends the model list has
    assert "ignored" in w


def test_a_file_box_setting_on_a_wrong_port_names_the_file(tmp_path):
    f = tmp_path / "sjf.yaml"
    f.write_text("backends:\n  http://localhost:11435:\n    box: {max_loaded: 1}\n")
    (w,) = _warnings({"SJF_CONFIG": str(f)}, OLLAMA)
    assert w.startswith(f"SJF_CONFIG file {f}: 'backends': backend http://localhost:11435 matches no deployment's "
                        "api_base"), w


def test_a_models_entry_no_deployment_on_that_box_serves_is_warned_once_with_the_closest_name():
    env = {"SJF_BACKEND_BOX": '{"http://localhost:11434/v1/": {"models": {"qwen2.5:7": {"slots": 2}, '
                              '"qwen2.5:7b": {"slots": 1}}}}'}
    (w,) = _warnings(env, OLLAMA)
    assert w.startswith("SJF_BACKEND_BOX: backend http://localhost:11434/v1/: models entry 'qwen2.5:7' names no model "
                        "that a deployment on that box serves"), w
    assert "did you mean 'qwen2.5:7b'?" in w
    # a model served on another box is no model of this one
    other = _model_list(("ollama_chat/qwen2.5:7b", BOX), ("openai/llama3", "http://127.0.0.1:8080/v1"))
    env = {"SJF_BACKEND_BOX": '{"http://localhost:11434": {"models": {"llama3": {"slots": 2}}}}'}
    (w,) = _warnings(env, other)
    assert "models entry 'llama3'" in w and "qwen2.5:7b" in w


def test_sjf_box_models_that_no_deployment_serves_are_warned():
    (w,) = _warnings({"SJF_BOX": '{"models": {"qwen-coder": {"slots": 2}}}'}, OLLAMA)
    assert w.startswith("SJF_BOX: models entry 'qwen-coder' names no model that a deployment serves"), w
    assert _warnings({"SJF_BOX": '{"models": {"qwen2.5-coder:1.5b": {"slots": 2}}}'}, OLLAMA) == []


# ---- 2. errors of SJF_BACKEND_BOX name SJF_BACKEND_BOX -----------------------------------------
def _error(env: dict) -> str:
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env(env)
    return str(info.value)


def test_a_bad_value_of_sjf_backend_box_names_sjf_backend_box():
    msg = _error({"SJF_BACKEND_BOX": '{"http://localhost:1": {"kind": "serial", "max_loaded": 0}}'})
    assert msg.startswith("bad SJF setting SJF_BACKEND_BOX: box of backend http://localhost:1: max_loaded"), msg


def test_sjf_backend_box_keyed_on_box_settings_says_the_keys_are_urls_and_suggests_sjf_box():
    msg = _error({"SJF_BACKEND_BOX": '{"max_loaded": 1}'})
    assert msg.startswith("bad SJF setting SJF_BACKEND_BOX: its keys are backend URLs (a deployment's api_base"), msg
    assert "'max_loaded' is not one" in msg and """SJF_BOX='{"max_loaded": 1}'""" in msg, msg


def test_the_file_s_box_errors_still_name_the_file(tmp_path):
    f = tmp_path / "sjf.yaml"
    f.write_text("backends:\n  http://localhost:1:\n    box: {cap: 0}\n")
    assert _error({"SJF_CONFIG": str(f)}).startswith(f"bad SJF setting SJF_CONFIG file {f}: 'backends': box of backend")


# ---- 3. a value that is not JSON ---------------------------------------------------------------
@pytest.mark.parametrize("var, shape", [("SJF_BOX", '{"kind": "serial"}'), ("SJF_OVERLOAD", '{"max_queue_depth": 32}'),
                                        ("SJF_BACKEND_BOX", '{"http://localhost:11434": {"kind": "ollama"}}'),
                                        ("SJF_BACKEND_SLOTS", '{"http://localhost:8080/v1": 2}')])
def test_a_json_setting_that_is_not_json_says_so_and_shows_the_shape(var, shape):
    msg = _error({var: "{not json" if var == "SJF_BACKEND_SLOTS" else "not json"})
    assert msg.startswith(f"bad SJF_* environment setting: {var}: not valid JSON ("), msg
    assert f"{var}='{shape}'" in msg, msg


# ---- 4. did you mean ---------------------------------------------------------------------------
def test_a_misspelt_box_kind_or_key_gets_the_closest_one():
    msg = _error({"SJF_BOX": '{"kind": "ollamaa"}'})
    assert "kind must be one of" in msg and "got 'ollamaa'; did you mean 'ollama'?" in msg, msg
    assert "did you mean 'max_loaded'?" in _error({"SJF_BOX": '{"max_load": 1}'})
    assert "did you mean 'seconds'?" in _error({"SJF_BOX_ORDER": "second"})
    assert "did you mean" not in _error({"SJF_BOX": '{"kind": "tgi"}'})


def test_every_json_valued_variable_has_a_shape_to_show():
    """The JSON treatment is one place (``_read.not_json``): a JSON-valued variable added later
    must bring its shape, or its error would say less than the others'."""
    import json

    from sjf_core.config import _read

    json_vars = {var for var, (_, parse) in _read.ENV.items() if parse is json.loads} | {"SJF_BACKEND_SLOTS"}
    assert json_vars == set(_read.JSON_SHAPES)
    for var, shape in _read.JSON_SHAPES.items():
        json.loads(shape)  # the shape shown is itself valid


def test_no_warning_when_the_model_list_cannot_tell():
    """A deployment whose api_base is LiteLLM's ``os.environ/NAME`` may be the URL (the check reads
    no environment), and models kept in LiteLLM's database are not in the file: no guess."""
    env = {"SJF_BACKEND_BOX": '{"http://localhost:11435": {"models": {"chat": {"slots": 2}}}}'}
    by_env = _model_list(("ollama_chat/qwen2.5:7b", BOX), ("ollama_chat/chat", "os.environ/OLLAMA_2"))
    assert _warnings(env, by_env) == []
    in_db = {**_model_list(("ollama_chat/qwen2.5:7b", BOX)),
             "general_settings": {"cancel_on_disconnect": True, "store_model_in_db": True}}
    assert _warnings(env, in_db) == []
    assert len(_warnings(env, _model_list(("ollama_chat/qwen2.5:7b", BOX)))) == 1  # the same list, told
