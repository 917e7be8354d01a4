"""A small inventory module: the sample file for the language-server tests and latency benchmark."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0
    tags: list[str] = field(default_factory=list)

    def total(self) -> float:
        """Value of all units of this item in stock."""
        return self.price * self.quantity

    def is_available(self) -> bool:
        return self.quantity > 0


class Inventory:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        if item.name in self.items:
            self.items[item.name].quantity += item.quantity
        else:
            self.items[item.name] = item

    def remove(self, name: str, quantity: int = 1) -> bool:
        item = self.items.get(name)
        if item is None or item.quantity < quantity:
            return False
        item.quantity -= quantity
        return True

    def value(self) -> float:
        return sum(item.total() for item in self.items.values())

    def by_tag(self, tag: str) -> list[Item]:
        return [item for item in self.items.values() if tag in item.tags]

    def cheapest(self) -> Item | None:
        available = [item for item in self.items.values() if item.is_available()]
        if not available:
            return None
        return min(available, key=lambda item: item.price)

    def save(self, path: Path) -> None:
        data = [
            {"name": item.name, "price": item.price, "quantity": item.quantity, "tags": item.tags}
            for item in self.items.values()
        ]
        path.write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, path: Path) -> Inventory:
        inventory = cls()
        for row in json.loads(path.read_text()):
            inventory.add(Item(row["name"], row["price"], row["quantity"], row.get("tags", [])))
        return inventory


def report(inventory: Inventory) -> str:
    lines = []
    for item in sorted(inventory.items.values(), key=lambda item: item.name):
        lines.append(f"{item.name:20} {item.quantity:5} x {item.price:8.2f} = {item.total():10.2f}")
    lines.append(f"{'total':20} {inventory.value():29.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    stock = Inventory()
    stock.add(Item("apple", 0.5, 100, ["fruit"]))
    stock.add(Item("pear", 0.75, 40, ["fruit"]))
    stock.add(Item("hammer", 12.0, 3, ["tools"]))
    print(report(stock))
