"""Twelve toolsets for the strict evaluation of the embedded model (``local_eval_strict.py``).

Written before any tuning of the driver (issue 30), as a developer would write them: plain functions with
docstrings, typed arguments, ``Literal`` enums and ``str | None`` options, returning small records from a
fixed table. Unknown keys return an ``error`` record, as a real lookup would. The first six toolsets are
the development set, the last six the held-out set (``local_eval_data/``).
"""

from __future__ import annotations

from typing import Any, Literal

import toolwire

# -- dev: weather -------------------------------------------------------------------------------------------

_FORECAST = {
    ("lisbon", "today"): {"high_c": 21, "low_c": 14, "sky": "sunny", "rain_chance": "10%"},
    ("lisbon", "tomorrow"): {"high_c": 19, "low_c": 13, "sky": "showers", "rain_chance": "70%"},
    ("montreal", "today"): {"high_c": -3, "low_c": -11, "sky": "snow", "rain_chance": "0%"},
    ("montreal", "tomorrow"): {"high_c": -6, "low_c": -15, "sky": "clear", "rain_chance": "0%"},
    ("nairobi", "today"): {"high_c": 26, "low_c": 15, "sky": "partly cloudy", "rain_chance": "30%"},
}


@toolwire.tool
def get_forecast(city: str, day: Literal["today", "tomorrow"] = "today") -> dict[str, Any]:
    """Weather forecast for a city: high and low in °C, sky and chance of rain.

    Args:
        city: City name.
        day: Which day.
    """
    row = _FORECAST.get((city.strip().lower(), day))
    return {"city": city, "day": day, **row} if row else {"error": f"no forecast for {city}"}


# -- dev: online shop orders ------------------------------------------------------------------------------

_ORDERS = {
    "A-10482": {"status": "shipped", "items": 3, "total": "58.40 EUR", "carrier": "DHL"},
    "A-10977": {"status": "processing", "items": 1, "total": "12.99 EUR", "carrier": "none yet"},
    "B-20031": {"status": "delivered", "items": 2, "total": "140.00 EUR", "carrier": "UPS"},
}


@toolwire.tool
def get_order(order_id: str) -> dict[str, Any]:
    """Look up a customer order: status, number of items, total and carrier.

    Args:
        order_id: Order reference, for example A-12345.
    """
    row = _ORDERS.get(order_id.strip().upper())
    return {"order_id": order_id, **row} if row else {"error": f"unknown order {order_id}"}


@toolwire.tool
def get_return_policy(category: Literal["electronics", "clothing", "books"]) -> dict[str, Any]:
    """Return window and conditions for a product category.

    Args:
        category: Product category.
    """
    policies = {
        "electronics": {"days": 14, "condition": "unopened"},
        "clothing": {"days": 30, "condition": "tags attached"},
        "books": {"days": 7, "condition": "undamaged"},
    }
    return {"category": category, **policies[category]}


# -- dev: library -----------------------------------------------------------------------------------------

_BOOKS = {
    "the left hand of darkness": {"author": "Ursula K. Le Guin", "copies_available": 2, "shelf": "SF-14"},
    "middlemarch": {"author": "George Eliot", "copies_available": 0, "shelf": "CL-03"},
    "dune": {"author": "Frank Herbert", "copies_available": 5, "shelf": "SF-02"},
}
_MEMBERS = {
    "M-5521": {"name": "Priya Raman", "books_on_loan": 3, "fines": "2.50 EUR"},
    "M-0193": {"name": "Tomasz Nowak", "books_on_loan": 0, "fines": "0.00 EUR"},
}


@toolwire.tool
def find_book(title: str) -> dict[str, Any]:
    """Find a book in the catalogue by title: author, copies available and shelf.

    Args:
        title: Book title.
    """
    row = _BOOKS.get(title.strip().lower())
    return {"title": title, **row} if row else {"error": f"no book titled {title}"}


@toolwire.tool
def get_member(member_id: str) -> dict[str, Any]:
    """A library member's account: name, books on loan and unpaid fines.

    Args:
        member_id: Membership number such as M-1234.
    """
    row = _MEMBERS.get(member_id.strip().upper())
    return {"member_id": member_id, **row} if row else {"error": f"no member {member_id}"}


# -- dev: currency ----------------------------------------------------------------------------------------

_RATES = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0, "CHF": 0.95}
Currency = Literal["EUR", "USD", "GBP", "JPY", "CHF"]


@toolwire.tool
def convert_currency(amount: float, from_currency: Currency, to_currency: Currency) -> dict[str, Any]:
    """Convert an amount of money between currencies at today's rate.

    Args:
        amount: Amount to convert.
        from_currency: Currency of the amount.
        to_currency: Currency wanted.
    """
    value = round(amount / _RATES[from_currency] * _RATES[to_currency], 2)
    return {"amount": amount, "from": from_currency, "to": to_currency, "result": value}


# -- dev: support tickets -----------------------------------------------------------------------------------

_TICKETS = {
    "4471": {
        "subject": "VPN drops every hour",
        "status": "open",
        "assignee": "Marco Bellini",
        "priority": "high",
    },
    "4502": {
        "subject": "Printer on floor 3 jammed",
        "status": "closed",
        "assignee": "Aiko Tanaka",
        "priority": "low",
    },
}


@toolwire.tool
def get_ticket(ticket_number: str) -> dict[str, Any]:
    """Fetch an IT support ticket: subject, status, assignee and priority.

    Args:
        ticket_number: The ticket number.
    """
    row = _TICKETS.get(ticket_number.strip().lstrip("#"))
    return {"ticket": ticket_number, **row} if row else {"error": f"no ticket {ticket_number}"}


@toolwire.tool
def list_open_tickets(assignee: str | None = None) -> dict[str, Any]:
    """Count the open tickets, optionally only those of one assignee.

    Args:
        assignee: Full name of a support engineer.
    """
    open_ = [t for t in _TICKETS.values() if t["status"] == "open"]
    if assignee:
        open_ = [t for t in open_ if t["assignee"].lower() == assignee.strip().lower()]
    return {"assignee": assignee, "open_tickets": len(open_)}


# -- dev: recipes -------------------------------------------------------------------------------------------

_RECIPES = {
    "shakshuka": {"minutes": 35, "servings": 4, "main_ingredient": "eggs"},
    "pad thai": {"minutes": 30, "servings": 2, "main_ingredient": "rice noodles"},
    "ratatouille": {"minutes": 75, "servings": 6, "main_ingredient": "aubergine"},
}


@toolwire.tool
def get_recipe(dish: str) -> dict[str, Any]:
    """Recipe facts for a dish: total minutes, servings and main ingredient.

    Args:
        dish: Name of the dish.
    """
    row = _RECIPES.get(dish.strip().lower())
    return {"dish": dish, **row} if row else {"error": f"no recipe for {dish}"}


# -- held-out: flights ----------------------------------------------------------------------------------------

_FLIGHTS = {
    "LH1830": {"status": "delayed", "departure": "16:45", "gate": "B22", "destination": "Barcelona"},
    "AF0274": {"status": "on time", "departure": "09:10", "gate": "K41", "destination": "Tokyo"},
    "KL1002": {"status": "cancelled", "departure": "07:30", "gate": "none", "destination": "London"},
}


@toolwire.tool
def flight_status(flight_number: str) -> dict[str, Any]:
    """Live status of a flight: status, departure time, gate and destination.

    Args:
        flight_number: Airline code and number, like BA0123.
    """
    row = _FLIGHTS.get(flight_number.strip().upper().replace(" ", ""))
    return {"flight": flight_number, **row} if row else {"error": f"unknown flight {flight_number}"}


# -- held-out: staff directory ------------------------------------------------------------------------------

_STAFF = {
    "helena costa": {"department": "Finance", "office": "3.14", "extension": "4021"},
    "jonas weber": {"department": "Legal", "office": "5.02", "extension": "4388"},
    "fatima zahra": {"department": "Engineering", "office": "2.40", "extension": "4115"},
}


@toolwire.tool
def find_employee(full_name: str) -> dict[str, Any]:
    """Staff directory entry: department, office and phone extension.

    Args:
        full_name: First and last name.
    """
    row = _STAFF.get(full_name.strip().lower())
    return {"name": full_name, **row} if row else {"error": f"nobody called {full_name}"}


@toolwire.tool
def book_meeting_room(room: Literal["Aurora", "Borealis", "Cirrus"], hour: int) -> dict[str, Any]:
    """Book a meeting room for one hour today.

    Args:
        room: Room name.
        hour: Start hour, 8 to 18.
    """
    if not 8 <= hour <= 18:
        return {"error": "rooms can be booked from 8 to 18"}
    return {"room": room, "hour": hour, "booked": True, "booking_id": f"R-{room[:2].upper()}{hour:02d}"}


# -- held-out: parcels ----------------------------------------------------------------------------------------

_PARCELS = {
    "1Z999AA10123456784": {"status": "out for delivery", "location": "Leeds depot", "eta": "today 18:00"},
    "JD014600006281742": {"status": "in transit", "location": "Frankfurt hub", "eta": "Thursday"},
}


@toolwire.tool
def track_parcel(tracking_number: str, carrier: str | None = None) -> dict[str, Any]:
    """Track a parcel: status, last known location and estimated delivery.

    Args:
        tracking_number: The tracking number on the label.
        carrier: Carrier name if known.
    """
    row = _PARCELS.get(tracking_number.strip().upper())
    return {"tracking_number": tracking_number, **row} if row else {"error": "tracking number not found"}


# -- held-out: inventory --------------------------------------------------------------------------------------

_STOCK = {
    ("WID-220", "north"): 140,
    ("WID-220", "south"): 12,
    ("BOLT-M8", "north"): 0,
    ("BOLT-M8", "south"): 5300,
}


@toolwire.tool
def stock_level(part_number: str, warehouse: Literal["north", "south"]) -> dict[str, Any]:
    """Units of a part in stock at one warehouse.

    Args:
        part_number: Part number.
        warehouse: Warehouse.
    """
    units = _STOCK.get((part_number.strip().upper(), warehouse))
    if units is None:
        return {"error": f"unknown part {part_number}"}
    return {"part_number": part_number, "warehouse": warehouse, "units": units}


# -- held-out: translation ------------------------------------------------------------------------------------

_PHRASES = {
    ("good morning", "Spanish"): "buenos días",
    ("good morning", "German"): "guten Morgen",
    ("where is the station", "French"): "où est la gare",
    ("thank you very much", "German"): "vielen Dank",
    ("thank you very much", "Spanish"): "muchas gracias",
}


@toolwire.tool
def translate(text: str, target_language: Literal["French", "German", "Spanish"]) -> dict[str, Any]:
    """Translate a short phrase from English.

    Args:
        text: The English phrase.
        target_language: Language to translate into.
    """
    found = _PHRASES.get((text.strip().lower().rstrip("?.!"), target_language))
    return {"text": text, "language": target_language, "translation": found or "(no translation found)"}


# -- held-out: calendar ---------------------------------------------------------------------------------------

_CALENDAR = {
    "2025-03-14": [{"time": "10:00", "title": "Budget review"}, {"time": "15:30", "title": "Dentist"}],
    "2025-03-17": [{"time": "09:00", "title": "Team standup"}],
}


@toolwire.tool
def list_events(date: str) -> dict[str, Any]:
    """Calendar events on a date.

    Args:
        date: Date as YYYY-MM-DD.
    """
    events = _CALENDAR.get(date.strip(), [])
    return {"date": date, "events": events, "count": len(events)}


TOOLSETS: dict[str, tuple[Any, ...]] = {
    # development set
    "weather": (get_forecast,),
    "shop": (get_order, get_return_policy),
    "library": (find_book, get_member),
    "currency": (convert_currency,),
    "helpdesk": (get_ticket, list_open_tickets),
    "recipes": (get_recipe,),
    # held-out set
    "flights": (flight_status,),
    "office": (find_employee, book_meeting_room),
    "parcels": (track_parcel,),
    "inventory": (stock_level,),
    "translation": (translate,),
    "calendar": (list_events,),
}
