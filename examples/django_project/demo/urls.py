from django.urls import path

from demo import views

urlpatterns = [
    path("", views.home, name="home"),
    path("health", views.health, name="health"),
    path("api/items", views.api_items, name="api-items"),
    path("login", views.login, name="login"),
    path("report", views.async_report, name="report"),
]
