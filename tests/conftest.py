import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The files that take longest (seconds of one worker, measured with
# `pytest -n 2 --dist loadfile --durations=120` on 2026-11-29) are collected
# first, so that with pytest-xdist (the README's test command) a worker starts
# on them at once instead of picking them up last, when the other worker has
# nothing left to do. The order inside a file is kept.
SLOW_FIRST = (
    "test_firmware_boards_all.py",   # ~3,100 s with the next: every bundled model on every QEMU board,
    "test_firmware_boards_all_2.py", # the boards split in two files so two workers share them
    "test_one_truth.py",             # ~1,080 s
    "test_firmware_pipeline.py",     # ~540 s
    "test_readme_tour.py",           # ~380 s
    "test_firmware.py",
    "test_ops_ctrlflow_nested.py",
    "test_firmware_library.py",
    "test_int4_conv.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
