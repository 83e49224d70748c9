#!/bin/sh
# Writes the command reference from the built kernelevo's help: docs/reference/commands.md
# (`kernelevo help --markdown`) and docs/reference/commands/COMMAND.md for every command it lists
# (`kernelevo help --markdown COMMAND`). ctest -R CliReference fails while they differ from the tool's.
# Usage: scripts/cli_reference.sh [KERNELEVO]   (default: build/tool/cli/kernelevo)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exe=${1:-$root/build/tool/cli/kernelevo}
out=$root/docs/reference
"$exe" help --markdown > "$out/commands.md.new"
commands=$(sed -n 's|^- \[\([a-z-]*\)\](commands/\1\.md): .*|\1|p' "$out/commands.md.new")
rm -rf "$out/commands"
mkdir "$out/commands"
for c in $commands; do
    "$exe" help --markdown "$c" > "$out/commands/$c.md"
done
mv "$out/commands.md.new" "$out/commands.md"
echo "cli_reference: wrote $out/commands.md and $(echo $commands | wc -w) pages in $out/commands/"
