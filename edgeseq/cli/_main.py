"""The `edgeseq` command group; every command module registers itself on `main`."""

import click

from edgeseq.errors import EdgeseqError


class _Group(click.Group):
    """Print edgeseq's own errors as one clear line (no traceback) and exit non-zero."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except EdgeseqError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="edgeseq")
def main():
    """edgeseq: learn the order of costly feature groups, export it, run it anytime."""
