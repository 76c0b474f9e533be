"""The ``pyembed`` command: the group and its error handling live in
pyembed.cli.app; each sub-command has its own module here."""
from pyembed.cli import check, demo, firmware, model, ops, plan, profiles, schedule, simulate, vectors
from pyembed.cli.app import exit_code_for, main  # noqa: F401

main.add_command(demo.demo_command)
main.add_command(plan.command())
model.model.short_help = "Inspect a model (operators, MACs, weights) or run it on random inputs."
main.add_command(model.model)
main.add_command(schedule.command())
main.add_command(simulate.simulate_command)
main.add_command(check.check_command)
main.add_command(profiles.profiles_command)
main.add_command(vectors.vectors)
main.add_command(ops.ops_command)
firmware.firmware_command.short_help = "Write a Cortex-M firmware project; --run builds it and runs it under QEMU."
main.add_command(firmware.firmware_command)
from pyembed.cli import match  # noqa: E402  (issue 32: matching on the device)
main.add_command(match.match_command)
