"""Views of the example project."""

from django.http import HttpRequest, HttpResponse, JsonResponse

from ratekeeper.django import ratelimit


def home(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello\n")


def health(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n")


def api_items(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"items": [], "method": request.method})


@ratelimit("3/5min", key="identity:email", method="POST")
def login(request: HttpRequest) -> HttpResponse:
    """A login form limited per posted email, as rack-attack users do."""
    if request.method == "POST":
        return HttpResponse("wrong password\n", status=401)
    return HttpResponse("<form method=post><input name=email><input name=password type=password></form>")


@ratelimit("2/minute", key="ip")
async def async_report(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"report": "ready"})
