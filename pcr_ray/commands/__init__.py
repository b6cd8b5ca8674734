"""How a `pcr-ray` command is built: `hydra_app.hydra_command` wraps every Hydra command; `core` holds the others;
`completion` routes tab completion to the command being typed.

A command is a function `main(argv) -> int` registered by name in `pcr_ray.cli.COMMANDS`. One whose options are a
config in conf/ is built by `hydra_command(name, config_name, run, usage)`: Hydra's `@hydra.main` (so `-m` sweeps,
`--cfg job` and `--shell-completion` work), the composed config checked against its schema (pcr_ray.configs), and
the same errors and exit statuses for every command (docs/development.md, "Add a command").
"""
