"""Every order bar knows (``bar.step.orders``): each handler registers itself as its module
loads, and ``load`` loads them all, for who is about to look one up."""


def load() -> None:
    """Register the handler of every order."""
    from bar.aide import answers, decide, flow  # noqa: F401  (decide.*, decide.take, flow)
    from bar.step import order_ops  # noqa: F401  (checkpoint, rollback)
    from bar.task import board_orders  # noqa: F401  (board)
