"""clairvoyant-sjf tooling: backend emulator, proxy runner, benchmarks, simulator,
training and evaluation, and the ``sjf`` command line.

Not needed at run time by the plugins (``sjf_core``, ``litellm_sjf``, ``openai_sjf``);
installed with the ``bench`` / ``train`` extras, which bring aiohttp, tqdm, matplotlib.
"""
