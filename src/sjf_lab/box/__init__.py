"""One box, many models: the emulator's model of an Ollama / LM Studio / llama-swap server.

Modules, one job each: :mod:`~sjf_lab.box.config` (the settings), :mod:`~sjf_lab.box.scheduler`
(loaded runners, loads, eviction, the pending queue), :mod:`~sjf_lab.box.speed` (answers
sharing the box's speed), :mod:`~sjf_lab.box.fifo` (a runner's slots), :mod:`~sjf_lab.box.lane`
(a request's path through the emulator), :mod:`~sjf_lab.box.formats` (Ollama's durations, LM
Studio's stats, embedding answers), :mod:`~sjf_lab.box.routes` (each server's listings).

Example::

    from sjf_lab.box import BoxConfig, ModelSpec
    from sjf_lab.emulator import EmulatorConfig, EmulatorThread

    box = BoxConfig(models=(ModelSpec("chat", tokens_per_s=200, load_s=3),
                            ModelSpec("auto", tokens_per_s=400, load_s=1)), max_loaded=1)
    with EmulatorThread(EmulatorConfig(box=box)) as emu:
        ...  # http://127.0.0.1:{emu.port} (Ollama) and emu.base_url (OpenAI)
        emu.stats()["box"]["loads"]
"""

from sjf_lab.box.config import BoxConfig, ModelSpec, parse_model_spec

__all__ = ["BoxConfig", "ModelSpec", "parse_model_spec"]
