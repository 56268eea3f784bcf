"""Learning a box from the box (sjf_core.admission._box_read): the emulator answers Ollama's,
LM Studio's and llama-swap's listings over real HTTP, as those servers do."""

from __future__ import annotations

from sjf_core.admission._box_read import read_box
from sjf_lab.box import BoxConfig, ModelSpec


async def test_read_box_tells_each_kind_from_its_own_listing(emulator_factory):
    emu = await emulator_factory(box=BoxConfig(models=(ModelSpec("chat"), ModelSpec("auto")), max_loaded=2,
                                               preload=("chat",)))
    root = f"http://127.0.0.1:{emu.port}"
    rep = await read_box(root + "/v1")
    assert rep.kind == "ollama" and {"chat", "chat:latest", "auto"} <= rep.catalogue and "chat" in rep.loaded
    assert "auto" not in rep.loaded
    lms = await read_box(root, kinds=("lmstudio",))
    assert lms.kind == "lmstudio" and lms.catalogue == {"chat", "auto"} and lms.loaded == {"chat"}
    assert lms.slots == {"chat": 1}
    swap = await read_box(root, kinds=("llama-swap",))
    assert swap.kind == "llama-swap" and swap.loaded == {"chat"} and {"chat", "auto"} <= swap.catalogue
    assert await read_box("http://127.0.0.1:9/v1") is None  # nothing answers: a plain backend
