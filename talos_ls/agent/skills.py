"""Skills: instructions for a kind of job, loaded by the agent only when it needs them.

A skill is a folder holding `SKILL.md`: YAML front matter with `name` and `description`, then the
instructions. Skills come from the package (the built-in ones), the user config directory
(`~/.config/talos/skills/` on Linux) and the workspace (`.talos/skills/`); a later one of the
same name replaces an earlier one, so a workspace can refine a built-in skill. The model sees
names and descriptions; a body is loaded with the `load_skill` tool. A malformed skill is
reported by name and skipped.

Only the front matter's simple `key: value` lines are read (quoted or not): the two fields Talos
needs, without a YAML dependency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..errors import TalosError
from ..files import read_regular

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_SKILL_BYTES = 256 * 1024


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    path: Path


class SkillError(TalosError):
    """A SKILL.md that cannot be used; the message says why."""


def parse_skill(path: Path) -> Skill:
    text = read_regular(path, MAX_SKILL_BYTES).decode("utf-8", errors="replace")
    if not text.startswith("---"):
        raise SkillError("no front matter (the file must start with ---)")
    end = text.find("\n---", 3)
    if end < 0:
        raise SkillError("the front matter is not closed with ---")
    fields: dict[str, str] = {}
    for line in text[3:end].strip().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise SkillError(f"front matter line {line.strip()!r} is not key: value")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        fields[key.strip()] = value
    name, description = fields.get("name", ""), fields.get("description", "")
    if not _NAME.match(name):
        raise SkillError(f"name {name!r} must be lowercase letters, digits and dashes")
    if not description:
        raise SkillError("description is missing")
    body = text[end + 4 :].strip()
    if not body:
        raise SkillError("the instructions are empty")
    return Skill(name, description, body, path)


def skill_dirs(workspace: str | Path | None = None) -> list[Path]:
    dirs = [
        Path(__file__).resolve().parent.parent / "skills",
        platformdirs.user_config_path("talos") / "skills",
    ]
    if workspace is not None:
        dirs.append(Path(workspace) / ".talos" / "skills")
    return dirs


def discover(workspace: str | Path | None = None) -> tuple[dict[str, Skill], list[str]]:
    """Every skill by name, and the problems found (one line per skipped skill)."""
    skills: dict[str, Skill] = {}
    problems: list[str] = []
    for base in skill_dirs(workspace):
        if not base.is_dir():
            continue
        for folder in sorted(p for p in base.iterdir() if p.is_dir()):
            path = folder / "SKILL.md"
            if not path.exists():
                continue
            if not path.resolve().is_relative_to(base.resolve()):
                problems.append(f"skill {folder.name} ({path}) skipped: it links outside {base}")
                continue
            try:
                skill = parse_skill(path)
            except (SkillError, OSError) as exc:
                problems.append(f"skill {folder.name} ({path}) skipped: {exc}")
                continue
            skills[skill.name] = skill
    return skills, problems
