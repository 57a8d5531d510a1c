# frozen_string_literal: true

Rails.application.routes.draw do
  root "pages#show"
  match "*path" => "pages#show", via: :all
end
