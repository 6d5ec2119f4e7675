"""Logcat text for marker tests and the adb stand-in, built from the lines in Mozilla's Raptor."""

from __future__ import annotations

# The two lines quoted in Mozilla's Raptor, verbatim.
SEED_LAUNCH = (
    "I/PerformanceTiming( 5582): Performance Entry: verticalhome.gaiamobile.org|mark|"
    "appLaunch@clock.gaiamobile.org|80081.169720|0.000000|1434771804212"
)
SEED_VISUALLY = (
    "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|mark|visuallyLoaded|"
    "1074.739956|0.000000|1434771805380"
)

OFFSETS = {  # ms after the launch, as in the seed's results table (roughly)
    "navigationLoaded": 214,
    "navigationInteractive": 245,
    "visuallyLoaded": 798,
    "contentInteractive": 799,
    "fullyLoaded": 802,
}


def brief_iteration(
    launch_epoch: int, pid: int = 6118, noise: bool = True, app: str = "clock.gaiamobile.org"
) -> list[str]:
    """One cold launch of an app (the clock's) in brief format, other processes interleaved."""
    lines = [
        f"I/PerformanceTiming( 5582): Performance Entry: verticalhome.gaiamobile.org|mark|"
        f"appLaunch@{app}|80081.169720|0.000000|{launch_epoch}"
    ]
    for i, (name, offset) in enumerate(OFFSETS.items()):
        if noise:
            lines.append(
                f"D/wpa_supplicant(  421): wlan0: RX ctrl_iface - hexdump(len={i}): 50 49 4e 47"
            )
        lines.append(
            f"I/PerformanceTiming( {pid}): Performance Entry: {app}|mark|{name}|"
            f"{offset + 1000.5:.6f}|0.000000|{launch_epoch + offset}"
        )
    return lines


def threadtime_iteration(launch_epoch: int, pid: int = 7001) -> list[str]:
    """The same in adb's default format."""
    return [
        f"06-19 20:43:24.212  5582  5582 I PerformanceTiming: Performance Entry: "
        f"verticalhome.gaiamobile.org|mark|appLaunch@clock.gaiamobile.org|1.0|0.000000|{launch_epoch}",
        *(
            f"06-19 20:43:25.{i:03d}  {pid}  {pid} I PerformanceTiming: Performance Entry: "
            f"clock.gaiamobile.org|mark|{name}|{offset}.0|0.000000|{launch_epoch + offset}"
            for i, (name, offset) in enumerate(OFFSETS.items())
        ),
    ]
