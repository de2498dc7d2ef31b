# The SConstruct `swbuild compile --exe`, `check` and `report` run (swbuild/scons/driver.py):
# one model, described by the JSON in ARGUMENTS['swjob'], through the same SwModel a
# project's SConstruct uses. Not a module to import.
import json

import swbuild.scons

job = json.loads(ARGUMENTS["swjob"])          # noqa: F821  (SCons' SConstruct globals)
SConsignFile(job["sconsign"])                 # noqa: F821
env = Environment(tools=["default", swbuild.scons.generate], target=job["target"],  # noqa: F821
                  SWBUILD_PROJECT=job["project"], SWBUILD_RUNTIME_DIR=job["runtime_dir"],
                  SWBUILD_SETS=job["sets"], verbose=job["verbose"])
if job.get("recipe"):
    m = env.SwModel(recipe=job["recipe"], out=job["out"])
else:
    m = env.SwModel(onnx=job["onnx"], inputs=job["inputs"], name=job["name"], sets=job["sets"], out=job["out"])
Default(m.runner)                             # noqa: F821
