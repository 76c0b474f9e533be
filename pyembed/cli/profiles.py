"""`pyembed profiles`: the MCU profiles the simulator knows."""

import click

from pyembed.cli.app import EXIT_CHECK_FAILED, EXIT_OK, _echo_json, _jsonable, progress_iter, run_with_progress  # noqa: F401


def _profile_dict(p):
    return {"name": p.name, "part": p.part, "core": p.core, "clock_hz": p.clock_hz,
            "regions": [{"name": r.name, "kind": r.kind, "base": r.base, "size": r.size, "bandwidth": r.bandwidth,
                         "read_wait": r.read_wait, "write_wait": r.write_wait} for r in p.regions.values()],
            "ram_bytes": sum(r.size for r in p.ram_regions()),
            "flash_bytes": p.regions[p.flash_region].size if p.flash_region in p.regions else 0,
            "dma": {"channels": p.dma.channels, "bandwidth": p.dma.bandwidth, "setup_cycles": p.dma.setup_cycles},
            "defaults": dict(p.defaults), "sources": list(p.sources), "path": p.path}


@click.command("profiles", short_help="List the MCU profiles (parts) the simulator knows, or describe some.")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
def profiles_command(names, as_json):
    """List the MCU profiles the simulator knows (bundled, plus any JSON in
    $PYEMBED_PROFILE_PATH), or describe the NAMES given: clock, every memory
    region with its address, size and bandwidth, DMA."""
    from firmware_sim.profiles import list_profiles, load_profile
    profs = [load_profile(n) for n in (names or list_profiles())]
    if as_json:
        _echo_json([_profile_dict(p) for p in profs])
        return
    if names:
        for p in profs:
            click.echo(p.describe())
            if p.sources:
                click.echo("  sources: " + "; ".join(p.sources))
        return
    click.echo(f"{'profile':<14} {'part':<24} {'core':<13} {'MHz':>5} {'RAM KB':>7} {'flash KB':>9}  RAM regions")
    for p in profs:
        d = _profile_dict(p)
        rams = ", ".join(f"{r.name} {r.size // 1024}K" for r in p.ram_regions())
        part = p.part.split(" (")[0][:24]
        click.echo(f"{p.name:<14} {part:<24} {p.core:<13} {p.clock_hz / 1e6:>5g} {d['ram_bytes'] // 1024:>7} "
                   f"{d['flash_bytes'] // 1024:>9}  {rams}")
    click.echo("details: pyembed profiles NAME; add parts as JSON files on $PYEMBED_PROFILE_PATH")


# -- vectors -----------------------------------------------------------------------------------------
