"""Finance and everyday-rate primitives: interest, annuities, prices, discounts, tax, profit and pay.

Rates are dimensionless fractions per period (5 percent = 0.05) and `n` is a dimensionless number of
periods; money params are in USD (other currencies convert 1:1).
"""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, product_of, quotient_of, reg
from pcr_ray.core.primitives.registry import DomainError, Param

F = "finance"
USD, D = "USD", "dimensionless"


def _growth(r: float, n: float) -> float:
    if 1 + r <= 0:
        raise DomainError("a rate of -100 percent or less per period")
    return (1 + r) ** n


def _loan_payment(p: float, r: float, n: float) -> float:
    if n <= 0:
        raise DomainError("loan_payment: the number of periods must be positive")
    if r == 0:
        return p / n
    return p * r / (1 - _growth(r, -n))


def _fv_annuity(pmt: float, r: float, n: float) -> float:
    if r == 0:
        return pmt * n
    return pmt * (_growth(r, n) - 1) / r


P, R, N = Param("p", USD), Param("r", D), Param("n", D)
reg("simple_interest", F, [P, R, N], USD, lambda p, r, n: p * r * n, "I = P r n",
    "Simple interest on principal P at rate r per period for n periods.")
reg("simple_amount", F, [P, R, N], USD, lambda p, r, n: p * (1 + r * n), "A = P (1 + r n)",
    "Balance after simple interest.")
reg("compound_amount", F, [P, R, N], USD, lambda p, r, n: p * _growth(r, n), "A = P (1 + r)^n",
    "Balance after n periods compounded at rate r per period.")
reg("compound_interest", F, [P, R, N], USD, lambda p, r, n: p * (_growth(r, n) - 1), "I = P ((1 + r)^n - 1)",
    "Interest earned with compounding (balance minus principal).")
reg("compound_amount_periodic", F, [P, R, Param("k", D), Param("years", D)], USD,
    lambda p, r, k, years: p * _growth(div(r, k, "zero compounding frequency"), k * years),
    "A = P (1 + r / k)^(k t)", "Balance with an annual rate r compounded k times a year for t years.")
reg("continuous_compound", F, [P, R, N], USD, lambda p, r, n: p * math.exp(r * n), "A = P e^(r n)",
    "Balance with continuous compounding.")
reg("present_value", F, [Param("fv", USD), R, N], USD, lambda fv, r, n: fv / _growth(r, n),
    "PV = FV / (1 + r)^n", "Present value of a future amount discounted at rate r for n periods.")
reg("loan_payment", F, [P, R, N], USD, _loan_payment, "PMT = P r / (1 - (1 + r)^-n)",
    "Payment per period that repays a loan P over n periods at rate r (annuity).")
reg("future_value_annuity", F, [Param("pmt", USD), R, N], USD, _fv_annuity, "FV = PMT ((1 + r)^n - 1) / r",
    "Future value of n equal payments at rate r per period.")
reg("unit_rate", F, [Param("total"), Param("count")], quotient_of("total", "count"),
    lambda total, count: div(total, count, "unit_rate: zero count"), "total / count",
    "Rate per unit (price per item, km per hour, ...).")
reg("total_cost", F, [Param("unit_price"), Param("quantity")], product_of("unit_price", "quantity"),
    lambda unit_price, quantity: unit_price * quantity, "unit_price * quantity",
    "Total from a per-unit price (or rate) times a quantity.")
reg("discount_price", F, [Param("price", USD), Param("p", D)], USD, lambda price, p: price * (1 - p),
    "price (1 - p)", "Price after a discount of fraction p.")
reg("discount_amount", F, [Param("price", USD), Param("p", D)], USD, lambda price, p: price * p, "price p",
    "Amount saved by a discount of fraction p.")
reg("price_after_tax", F, [Param("price", USD), Param("rate", D)], USD,
    lambda price, rate: price * (1 + rate), "price (1 + rate)",
    "Price including a sales tax (or tip) of fraction rate.")
reg("price_before_tax", F, [Param("total", USD), Param("rate", D)], USD,
    lambda total, rate: div(total, 1 + rate, "rate of -100 percent"), "total / (1 + rate)",
    "Pre-tax price from a tax-inclusive total.")
reg("profit", F, [Param("revenue"), Param("cost", "=revenue")], "=revenue",
    lambda revenue, cost: revenue - cost, "revenue - cost", "Profit (negative = loss).")
reg("profit_margin", F, [Param("revenue"), Param("cost", "=revenue")], D,
    lambda revenue, cost: div(revenue - cost, revenue, "profit_margin: zero revenue"),
    "(revenue - cost) / revenue", "Profit as a fraction of revenue.")
reg("markup_price", F, [Param("cost", USD), Param("markup", D)], USD,
    lambda cost, markup: cost * (1 + markup), "cost (1 + markup)",
    "Selling price from cost and a markup fraction.")
reg("split_evenly", F, [Param("total"), Param("n")], quotient_of("total", "n"),
    lambda total, n: div(total, n, "split_evenly: zero shares"), "total / n",
    "Share of a total split evenly among n (people, items, ...).")
reg("hourly_pay", F, [Param("rate", "USD/hour"), Param("hours", "hour")], USD,
    lambda rate, hours: rate * hours, "pay = rate * hours", "Pay for hours worked at an hourly rate.")
reg("change_due", F, [Param("paid", USD), Param("cost", USD)], USD, lambda paid, cost: paid - cost,
    "paid - cost", "Change returned after paying for something.")
reg("break_even_quantity", F,
    [Param("fixed", USD), Param("price", "USD/item"), Param("unit_cost", "USD/item")], "item",
    lambda fixed, price, unit_cost: div(fixed, price - unit_cost,
    "price equals unit cost: never breaks even"), "fixed / (price - unit_cost)",
    "Number of items to sell to cover fixed costs.")
reg("rule_of_72", F, [R], D, lambda r: div(0.72, r, "rule_of_72: zero rate"), "72 / (100 r)",
    "Approximate number of periods to double at rate r (rule of 72).")
