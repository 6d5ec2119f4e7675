"""Starting the programs a test measures: through labd's launcher, so a program's resource
figures are its own (`Launch`), or directly with what must happen between fork and exec
(`child_setup`: die with labd, chosen CPUs, no ASLR, never as root when told to drop)."""

from labd.process.child import child_setup, program_env, split_cpus, user_arguments
from labd.process.launcher import Launch, Usage, launcher_command

__all__ = [
    "Launch",
    "Usage",
    "child_setup",
    "launcher_command",
    "program_env",
    "split_cpus",
    "user_arguments",
]
