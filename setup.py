"""Package layout (everything else is in pyproject.toml).

Packages are discovered under ``src/`` (namespace discovery, as pyproject's
``packages.find`` would do), and the top-level ``models/`` folder is added as the
package ``sjf_core._models`` so the shipped predictor models install with a regular
wheel as well as with an editable install.
"""

from setuptools import Extension, find_namespace_packages, setup

setup(
    packages=find_namespace_packages(where="src") + ["sjf_core._models"],
    package_dir={"": "src", "sjf_core._models": "models"},
    # Optional C accelerator of the feature extractors (sjf_core.predict._fastscan); without a C
    # compiler the build skips it and the pure-Python extractors are used (same numbers).
    ext_modules=[Extension("sjf_core.predict._scan", ["src/sjf_core/predict/_scan.c"], optional=True,
                           extra_compile_args=["-O2"]),
                 # the lexicon score (sjf_core.predict._lexicon), same contract: optional, same numbers
                 Extension("sjf_core.predict._lex", ["src/sjf_core/predict/_lex.c"], optional=True, extra_compile_args=["-O2"])],
)
